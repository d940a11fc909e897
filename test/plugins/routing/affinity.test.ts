// Conversation affinity's placement: weighted rendezvous hashing with bounded load, and what it
// reports. Stand-in endpoints (id hash, weight, load); keys from fixed strings, so every count here
// is the same on every run.
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { Endpoint } from '../../../engine/backends/endpoints.js';
import { fnv1a32 } from '../../../engine/core/hash.js';
import { Placements } from '../../../engine/backends/placements.js';
import { affinityOutcome, openingTurn, rankKey, type AffinityKey } from '../../../plugins/routing/affinity.js';
import { balancer, noteOf, STRATEGIES } from '../../../plugins/routing/balancing.js';

const node = (name: string, weight = 1, state = 'healthy', priority = 1) =>
  ({
    name,
    id: name,
    idHash: fnv1a32(name),
    weight,
    state,
    priority,
    active: 0,
    queue: null,
    coolingUntil: 0,
    load(this: { active: number }) {
      return this.active;
    },
    cooling: () => false,
  }) as unknown as Endpoint;

/** A key from `text`; `body`: the request's (whether it opens its conversation is read from it). */
function key(text: string, body: string | null = null): AffinityKey {
  const d = createHash('sha1').update(text).digest();
  const [hi, lo] = [d.readUInt32LE(0), d.readUInt32LE(4)];
  const b = body === null ? null : Buffer.from(body);
  return {
    hi,
    lo,
    id: hi * 2 ** 21 + (lo >>> 11),
    source: 'conversation',
    body: b,
    home: null,
    hashed: null,
    stored: null,
    overloaded: false,
    leastLoaded: false,
  };
}

const OPENING = JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] });
const LATER = JSON.stringify({
  model: 'm',
  messages: [
    { role: 'user', content: 'hi' },
    { role: 'assistant', content: 'hello' },
    { role: 'user', content: 'more' },
  ],
});

/** The endpoint the key goes to. */
const placeKey = (tier: Endpoint[], k: AffinityKey, factor: number, now: number) => rankKey(tier, k, factor, now)[0];
const keys = (n: number) => Array.from({ length: n }, (_, i) => `conversation ${i}`);
/** Where each key goes with nothing in flight (no load bound in play). */
const homes = (list: Endpoint[], texts: string[]) => texts.map((t) => placeKey(list, key(t), 1.25, 0).name);

describe('rendezvous placement', () => {
  const [a, b, c, d] = ['a', 'b', 'c', 'd'].map((n) => node(n));

  it('gives a key the same endpoint whatever the order of the candidates', () => {
    const texts = keys(200);
    expect(homes([d, c, b, a], texts)).toEqual(homes([a, b, c, d], texts));
  });

  it('moves only the conversations of an endpoint that leaves, and they come back when it does', () => {
    const texts = keys(2000);
    const before = homes([a, b, c, d], texts);
    const without = homes([a, b, d], texts);
    let moved = 0;
    for (let i = 0; i < texts.length; i++) {
      if (before[i] === 'c') {
        moved++;
        expect(without[i]).not.toBe('c');
      } else expect(without[i]).toBe(before[i]);
    }
    // About a quarter were c's.
    expect(moved).toBeGreaterThan(400);
    expect(moved).toBeLessThan(600);
    expect(homes([a, b, c, d], texts)).toEqual(before);
  });

  it('spreads keys in proportion to weight', () => {
    const heavy = node('heavy', 3);
    const counts: Record<string, number> = {};
    for (const h of homes([a, b, heavy], keys(6000))) counts[h] = (counts[h] ?? 0) + 1;
    // Shares 1:1:3 of 6000 are 1200, 1200, 3600: within 5 %.
    expect(counts.heavy / 3600).toBeGreaterThan(0.95);
    expect(counts.heavy / 3600).toBeLessThan(1.05);
    expect(counts.a / 1200).toBeGreaterThan(0.9);
    expect(counts.b / 1200).toBeLessThan(1.1);
  });

  it('bounded load: a hot conversation never puts more than 1.25 × the mean on one endpoint', () => {
    const list = ['p', 'q', 'r', 's'].map((n) => node(n));
    // A skewed mix: half the requests are one conversation, the rest 50 others; every request
    // stays in flight, the worst case for a hot spot.
    const mix = Array.from({ length: 400 }, (_, i) => (i % 2 === 0 ? 'the hot one' : `cold ${i % 50}`));
    let passedOn = 0;
    for (const t of mix) {
      const k = key(t);
      const ep = placeKey(list, k, 1.25, 0);
      if (k.overloaded) passedOn++;
      (ep as unknown as { active: number }).active++;
      const total = list.reduce((n, e) => n + e.active, 0);
      for (const e of list) expect(e.active).toBeLessThanOrEqual(Math.ceil((1.25 * total) / list.length));
    }
    expect(passedOn).toBeGreaterThan(0);
  });

  it('keeps a conversation home while its endpoint is within the bound', () => {
    const list = ['p', 'q', 'r', 's'].map((n) => node(n));
    const k = key('steady');
    const home = placeKey(list, k, 1.25, 0);
    for (const e of list) (e as unknown as { active: number }).active = 2;
    expect(placeKey(list, key('steady'), 1.25, 0)).toBe(home);
  });
});

describe('through the balancer', () => {
  const settings = { shares: { busy: 4, warming: 10 }, maxLoadFactor: 1.25, byPriority: false };

  it("puts the key's endpoint first, then the rest in the key's order (where failover goes)", () => {
    const list = ['a', 'b', 'c'].map((n) => node(n));
    const order = balancer(STRATEGIES['round-robin'](), settings);
    const k = key('x');
    const first = order(list, k);
    expect(first[0]).toBe(k.home);
    expect(new Set(first).size).toBe(3);
    for (let i = 0; i < 5; i++) expect(order(list, key('x'))[0]).toBe(k.home);
  });

  it('under priority, chooses only among the top priority', () => {
    const top = [node('t1', 1, 'healthy', 9), node('t2', 1, 'healthy', 9)];
    const low = node('low', 1, 'healthy', 1);
    const order = balancer(STRATEGIES.priority(), { ...settings, byPriority: true });
    for (const t of keys(50)) expect(order([low, ...top], key(t))[0]).not.toBe(low);
  });

  it('without a key, plain balancing', () => {
    const list = ['a', 'b'].map((n) => node(n));
    const order = balancer(STRATEGIES['round-robin'](), settings);
    expect([order(list, null)[0].name, order(list, null)[0].name]).toEqual(['a', 'b']);
  });
});

describe('what affinity reports', () => {
  it('hit, moved (failover), moved (overloaded), moved (<state>) of a home out of rotation, none', () => {
    const [a, b, c] = ['a', 'b', 'c'].map((n) => node(n));
    const k = key('report');
    const home = placeKey([a, b, c], k, 1.25, 0);
    const others = [a, b, c].filter((e) => e !== home);
    const note = noteOf(k, [home, ...others], [], false);
    expect(affinityOutcome(note, home)).toBe('hit');
    expect(affinityOutcome(note, others[0])).toBe('moved (failover)');
    expect(affinityOutcome(noteOf({ ...k, overloaded: true }, others, [], false), others[0])).toBe('moved (overloaded)');
    // The home goes offline: placed among the others, the note names why it moved.
    (home as unknown as { state: string }).state = 'offline';
    const k2 = key('report');
    const next = placeKey(others, k2, 1.25, 0);
    expect(affinityOutcome(noteOf(k2, [next], [home], false), next)).toBe('moved (offline)');
    expect(affinityOutcome(noteOf(null, [a], [], false), a)).toBe('none');
  });

  it('of several endpoints out of rotation, the one the key scores best is its home', () => {
    const all = ['p', 'q', 'r', 's', 't', 'u'].map((n) => node(n));
    for (const t of keys(200)) {
      const k = key(t);
      const best = placeKey(all, key(t), 1.25, 0);
      const up = all.filter((e) => e !== best).slice(0, 2);
      const down = all.filter((e) => !up.includes(e));
      down.forEach((e, i) => ((e as unknown as { state: string }).state = i % 2 ? 'offline' : 'unhealthy'));
      const placed = placeKey(up, k, 1.25, 0);
      const note = noteOf(k, [placed], down, false);
      expect(note.home).toBe(best);
      expect(note.moved).toBe(best.state);
      all.forEach((e) => ((e as unknown as { state: string }).state = 'healthy'));
    }
  });
});

describe('a new conversation follows the load; a placed one stays where its cache is', () => {
  const settings = { shares: { busy: 4, warming: 10 }, maxLoadFactor: 1.25, byPriority: false };
  const busy = (e: Endpoint, n: number) => ((e as unknown as { active: number }).active = n);

  it('an opening turn goes to the least loaded when its home is busier; a later turn stays within the bound', () => {
    const [a, b] = ['a', 'b'].map((n) => node(n));
    for (const t of keys(50)) {
      const home = placeKey([a, b], key(t), 1.25, 0);
      const other = home === a ? b : a;
      busy(home, 1);
      const k = key(t, OPENING);
      expect(placeKey([a, b], k, 1.25, 0)).toBe(other);
      expect([k.hashed, k.leastLoaded]).toEqual([home, true]);
      expect(affinityOutcome(noteOf(k, [other, home], [], false), other)).toBe('moved (least_loaded)');
      // Not an opening turn: its cache is at home, which is within its bound (1 against 0 of 2).
      expect(placeKey([a, b], key(t, LATER), 1.25, 0)).toBe(home);
      busy(home, 0);
    }
  });

  it('tells an opening turn from a later one by its bytes, in every API', () => {
    for (const later of [
      LATER,
      JSON.stringify({ model: 'm', input: 'next', previous_response_id: 'resp_1' }),
      JSON.stringify({ model: 'm', input: [{ type: 'function_call_output', call_id: 'c', output: '4' }] }),
      JSON.stringify({ model: 'm', prompt: 'a bare prompt grows with its conversation' }),
    ])
      expect(openingTurn(Buffer.from(later)), later).toBe(false);
    for (const opening of [
      OPENING,
      JSON.stringify({ model: 'm', input: 'hi', instructions: 'be brief' }),
      JSON.stringify({ messages: [{ role: 'user', content: 'say "assistant"' }] }),
    ])
      expect(openingTurn(Buffer.from(opening)), opening).toBe(true);
  });

  it('with least-connections, four new conversations go to the idle endpoint while the other holds a long request', () => {
    const [a, b] = ['a', 'b'].map((n) => node(n));
    const order = balancer(STRATEGIES['least-connections'](), { ...settings, placements: new Placements() });
    busy(a, 1);
    for (const t of keys(4)) expect(order([a, b], key(t, OPENING))[0]).toBe(b);
  });

  it('a placement is remembered and its later turns keep to it, as a hit; back at its home it is forgotten', () => {
    const [a, b] = ['a', 'b'].map((n) => node(n));
    const placements = new Placements();
    const told: [number, string, boolean][] = [];
    placements.onPlaced = (id, ep, home) => told.push([id, ep.name, home]);
    const order = balancer(STRATEGIES['least-connections'](), { ...settings, placements });
    const t = keys(50).find((x) => placeKey([a, b], key(x), 1.25, 0) === a)!;
    busy(a, 1);
    const opening = key(t, OPENING);
    expect(order([a, b], opening)[0]).toBe(b);
    expect(told).toEqual([[opening.id, 'b', false]]);
    busy(a, 0);
    // The next turns: a is idle again, but the conversation's cache is on b.
    for (let i = 0; i < 3; i++) {
      const later = key(t, LATER);
      const ordered = order([a, b], later);
      expect(ordered[0]).toBe(b);
      expect(affinityOutcome(noteOf(later, ordered, [], false), b)).toBe('hit');
    }
    expect(told).toHaveLength(1);
    // b leaves, another that the key ranks below a comes: the hash's home takes it, and the
    // placement is forgotten (alone, a decides nothing: nothing is remembered or forgotten).
    expect(order([a], key(t, LATER))[0]).toBe(a);
    expect(placements.get(opening.id)).toBe(b);
    const c = ['c', 'd', 'e', 'f'].map((n) => node(n)).find((e) => placeKey([a, e], key(t), 1.25, 0) === a)!;
    expect(order([a, c], key(t, LATER))[0]).toBe(a);
    expect(placements.get(opening.id)).toBeUndefined();
    expect(told.at(-1)).toEqual([opening.id, 'a', true]);
  });

  it('a conversation the load bound moved stays where it went', () => {
    const list = ['p', 'q', 'r', 's'].map((n) => node(n));
    const placements = new Placements();
    const order = balancer(STRATEGIES['round-robin'](), { ...settings, placements });
    const k = key('hot', LATER);
    const home = placeKey(list, key('hot'), 1.25, 0);
    busy(home, 10);
    const moved = order(list, k)[0];
    expect([moved === home, k.overloaded]).toEqual([false, true]);
    busy(home, 0);
    expect(order(list, key('hot', LATER))[0]).toBe(moved);
  });

  it("keeps the most recent placements, a bounded number; another worker's are kept without being told again", () => {
    const [a, b] = ['a', 'b'].map((n) => node(n));
    const placements = new Placements();
    let told = 0;
    placements.onPlaced = () => told++;
    for (let i = 0; i < 20_000; i++) placements.place(i, b, false);
    expect([placements.size, placements.get(0), placements.get(19_999)]).toEqual([16_384, undefined, b]);
    placements.placedElsewhere(1e9, a, false);
    placements.placedElsewhere(19_999, a, true);
    expect([placements.get(1e9), placements.get(19_999), told]).toEqual([a, undefined, 20_000]);
  });
});
