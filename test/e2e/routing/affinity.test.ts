// Conversation affinity end to end: a conversation's turns land on one endpoint while it is
// routable and move once when it leaves; two gateway processes with one config place the same
// conversations on the same endpoints; the key's source and outcome show in the reply header,
// the access log and the metrics; weights split traffic in proportion.
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { request } from 'undici';
import { stringify } from 'yaml';
import { FakeBackend } from '../../../engine/demo/index.js';
import { closeAll, endpoint, NO_RATE_LIMITS, startGateway, type Started } from '../../helpers/gateway.js';
import { cleanEnv, configFile, serve } from '../../helpers/cli.js';
import { waitFor } from '../../helpers/wait.js';

let fakes: FakeBackend[] = [];
let gw: Started | null = null;
beforeAll(async () => {
  fakes = await Promise.all(['a', 'b', 'c', 'd'].map((n) => new FakeBackend({ family: 'pagedengine', name: n }).start()));
});
afterAll(async () => {
  for (const f of fakes) await f.stop();
});
beforeEach(() => fakes.forEach((f) => f.reset()));
afterEach(async () => {
  await closeAll(gw, []);
  gw = null;
});

/** Endpoints checked at start and then only when a test asks (or a request fails): no periodic
 *  check on busy cores can take one out of rotation under a test. */
const config = (extra: Record<string, unknown> = {}, weights: number[] = [], interval = '60s') => ({
  server: { rate_limits: NO_RATE_LIMITS },
  proxy: { load_balancer: 'round-robin', ...extra },
  discovery: {
    static: {
      endpoints: fakes.map((f, i) => endpoint(f.name, 'pagedengine', f.url, { check_interval: interval, ...(weights[i] ? { weight: weights[i] } : {}) })),
    },
  },
});

type Turn = { role: string; content: string };
/** One turn of a conversation: its history so far plus a new question; the answer joins it. */
async function turn(url: string, history: Turn[], question: string, headers: Record<string, string> = {}) {
  history.push({ role: 'user', content: question });
  const res = await request(`${url}/gw/pagedengine/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ model: 'test-model', messages: history }),
  });
  const body = (await res.body.json()) as any;
  expect(res.statusCode).toBe(200);
  history.push({ role: 'assistant', content: body.choices[0].message.content });
  return { endpoint: String(res.headers['x-gw-endpoint']), affinity: String(res.headers['x-gw-affinity']) };
}

const opening = (i: number): Turn[] => [{ role: 'system', content: `You are assistant number ${i}.` }];

describe('a conversation stays where its cache is', () => {
  it('every turn of every conversation lands on one endpoint (hit), and the conversations spread', async () => {
    gw = await startGateway(config());
    const homes = new Set<string>();
    for (let c = 0; c < 12; c++) {
      const history = opening(c);
      const first = await turn(gw.url, history, 'Hello');
      expect(first.affinity).toBe('hit');
      for (let t = 1; t < 4; t++) expect(await turn(gw.url, history, `Question ${t}`)).toEqual(first);
      homes.add(first.endpoint);
    }
    expect(homes.size).toBeGreaterThan(1);
    const log = gw.logs.find((l) => l.msg === 'request' && l.affinity);
    expect(log).toMatchObject({ affinity: 'hit', affinity_key: 'conversation' });
  });

  it('moves once when its endpoint leaves, stays there, and the header says why', async () => {
    // Checked only when this test asks (and after a connection failure), so nothing notices the
    // stop before the next turn does.
    gw = await startGateway(config());
    const history = opening(99);
    const home = (await turn(gw.url, history, 'Hello')).endpoint;
    const fake = fakes.find((f) => f.name === home)!;
    await fake.stop();
    const ep = gw.gw.runtime.endpoints.all.find((e) => e.name === home)!;
    // Before the health check notices: a failover, to where the key moves anyway.
    const failover = await turn(gw.url, history, 'Still there?');
    expect(failover.endpoint).not.toBe(home);
    expect(failover.affinity).toBe('moved (failover)');
    await waitFor(() => !ep.routable || undefined, 'the home endpoint out of rotation');
    const after = [];
    for (let t = 0; t < 4; t++) after.push(await turn(gw.url, history, `Question ${t}`));
    expect(new Set(after.map((a) => a.endpoint))).toEqual(new Set([failover.endpoint]));
    expect(after[0].affinity).toMatch(/^moved \((offline|unhealthy)\)$/);
    // Back: the conversation goes home again.
    await fake.start();
    await gw.gw.runtime.health.check(ep);
    await waitFor(() => ep.routable || undefined, 'the home endpoint back');
    expect((await turn(gw.url, history, 'Back?')).endpoint).toBe(home);
    const metrics = await (await request(`${gw.url}/internal/metrics`)).body.text();
    expect(metrics).toMatch(/gw_affinity_total\{family="pagedengine",route="proxy",outcome="moved",reason="failover"\} 1/);
  });

  it('least-connections: new conversations go to the idle endpoints while one holds a long request; their later turns stay there (hit)', async () => {
    gw = await startGateway(config({ load_balancer: 'least-connections' }));
    // Learn each conversation's hash home with nothing in flight, then forget it (a new gateway).
    const homes: string[] = [];
    for (let c = 0; c < 8; c++) homes.push((await turn(gw.url, opening(100 + c), 'Hello')).endpoint);
    await closeAll(gw, []);
    const count = (f: FakeBackend) => homes.filter((h) => h === f.name).length;
    const busy = fakes.reduce((most, f) => (count(f) > count(most) ? f : most));
    gw = await startGateway(config({ load_balancer: 'least-connections' }));
    // A long request on `busy`: sessions tried (each held where it lands) until one's home is it.
    const releases = new Map<FakeBackend, () => void>();
    const hold = (f: FakeBackend) => (f.behaviour.holdUntil = new Promise<void>((r) => releases.set(f, r)));
    fakes.forEach(hold);
    let long: Promise<unknown> = Promise.resolve();
    for (let k = 0; k < 64; k++) {
      long = turn(gw.url, [{ role: 'system', content: 'the long one' }], 'Write a novel', { 'x-gw-session-id': `long-${k}` });
      const at = await waitFor(() => fakes.find((f) => f.inFlight === 1), 'the long request held');
      if (at === busy) break;
      releases.get(at)!();
      await long;
      await waitFor(() => at.inFlight === 0 || undefined, 'the released request over');
      hold(at);
    }
    expect(busy.inFlight).toBe(1);
    for (const f of fakes) if (f !== busy) f.behaviour.holdUntil = null;
    busy.behaviour.holdUntil = null;
    const release = releases.get(busy)!;
    const conversations = homes.map((_, c) => opening(100 + c)).filter((_, c) => homes[c] === busy.name);
    expect(conversations.length).toBeGreaterThan(1);
    const placed: string[] = [];
    for (const history of conversations) {
      const first = await turn(gw.url, history, 'Hello');
      expect(first).toEqual({ endpoint: expect.not.stringMatching(busy.name), affinity: 'moved (least_loaded)' });
      placed.push(first.endpoint);
    }
    release();
    await long;
    // The long request is over: each conversation's later turns keep to where its cache now is.
    for (const [i, history] of conversations.entries())
      for (let t = 1; t < 3; t++) expect(await turn(gw.url, history, `Question ${t}`)).toEqual({ endpoint: placed[i], affinity: 'hit' });
  });

  it('a session header keys the conversation whatever its messages; no key: none', async () => {
    gw = await startGateway(config());
    const a = await turn(gw.url, [], 'one', { 'x-gw-session-id': 'session-1' });
    for (let i = 0; i < 5; i++) expect((await turn(gw.url, [], `other question ${i}`, { 'x-gw-session-id': 'session-1' })).endpoint).toBe(a.endpoint);
    expect(gw.logs.filter((l) => l.msg === 'request' && l.affinity_key === 'x-gw-session-id')).toHaveLength(6);
    const res = await request(`${gw.url}/gw/pagedengine/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'test-model' }),
    });
    await res.body.dump();
    expect(res.headers['x-gw-affinity']).toBe('none');
  });

  it.each([
    ['Claude Code', 'client-session-claude-code.json', 'x-claude-code-session-id'],
    ['Codex', 'client-session-codex.json', 'session-id'],
  ])('%s: the session header it sent (captured) keys its requests', async (_client, file, source) => {
    gw = await startGateway(config());
    const recorded = JSON.parse(readFileSync(new URL(`../../fixtures/engine-load/${file}`, import.meta.url), 'utf8')).requests as {
      headers: Record<string, string>;
    }[];
    // Per session id (one conversation continued and resumed, maybe a fresh one): where its requests went.
    const places = new Map<string, Set<string>>();
    for (const [i, r] of recorded.entries()) {
      const headers = Object.fromEntries(
        Object.entries(r.headers).filter(([k]) => !['host', 'content-length', 'connection', 'content-type', 'accept-encoding', 'accept'].includes(k)),
      );
      const id = headers[source];
      if (!places.has(id)) places.set(id, new Set());
      places.get(id)!.add((await turn(gw.url, [], `a different question ${i}`, headers)).endpoint);
    }
    expect([...places.values()].map((p) => p.size)).toEqual([...places.keys()].map(() => 1));
    expect(Math.max(...[...places.keys()].map((id) => recorded.filter((r) => r.headers[source] === id).length))).toBeGreaterThan(1);
    expect(gw.logs.filter((l) => l.msg === 'request').map((l) => l.affinity_key)).toEqual(recorded.map(() => source));
  });

  it('enabled: false restores plain balancing (turns rotate, no header)', async () => {
    gw = await startGateway(config({ affinity: { enabled: false } }));
    const history = opening(1);
    const seen = [];
    for (let t = 0; t < 4; t++) seen.push(await turn(gw.url, history, `q${t}`));
    expect(new Set(seen.map((s) => s.endpoint)).size).toBe(4);
    expect(seen[0].affinity).toBe('undefined');
  });
});

describe('the same placement everywhere', () => {
  const children: ChildProcess[] = [];
  afterAll(() => children.forEach((c) => c.kill()));

  it('two gateway processes with the same config place the same conversations on the same endpoints', async () => {
    const file = configFile(stringify({ ...config(), server: { host: '127.0.0.1', port: 0, rate_limits: NO_RATE_LIMITS } }));
    const [one, two] = await Promise.all([serve(['--config', file], cleanEnv()), serve(['--config', file], cleanEnv())]);
    children.push(one.child, two.child);
    const urls = [one.port, two.port].map((p) => `http://127.0.0.1:${p}`);
    // Both have checked every endpoint (each would fail over around one it has not).
    for (const u of urls) {
      await waitFor(async () => {
        const s = (await (await request(`${u}/internal/status/endpoints`)).body.json()) as any;
        return s.endpoints.every((e: any) => e.routable) || undefined;
      }, 'every endpoint routable');
    }
    // The second process sees the conversations in the opposite order, after a request of its
    // own: no balancer's turns could line the two up, only the conversations' keys.
    await turn(urls[1], opening(1000), 'Hello');
    const placements: string[][] = [[], []];
    for (let c = 0; c < 16; c++) placements[0].push((await turn(urls[0], opening(c), 'Hello')).endpoint);
    for (let c = 15; c >= 0; c--) {
      const t = await turn(urls[1], opening(c), 'Hello');
      expect(t.affinity).toBe('hit');
      placements[1][c] = t.endpoint;
    }
    expect(placements[1]).toEqual(placements[0]);
    expect(new Set(placements[0]).size).toBeGreaterThan(1);
  });
});

describe('weights', () => {
  it('round-robin without affinity: exactly in proportion', async () => {
    gw = await startGateway(
      config(
        { affinity: { enabled: false } },
        [1, 3, 0, 0].map((w) => w || 1),
      ),
    );
    const counts: Record<string, number> = {};
    for (let i = 0; i < 60; i++) {
      const e = (await turn(gw.url, [], `q${i}`)).endpoint;
      counts[e] = (counts[e] ?? 0) + 1;
    }
    // Weights 1, 3, 1, 1 of 6: 10, 30, 10, 10.
    expect(counts).toEqual({ a: 10, b: 30, c: 10, d: 10 });
  });

  it('affinity: conversations in proportion', async () => {
    gw = await startGateway(config({}, [1, 1, 1, 5]));
    const counts: Record<string, number> = {};
    for (let c = 0; c < 400; c++) {
      const history = opening(c);
      const e = (await turn(gw.url, history, 'Hello')).endpoint;
      counts[e] = (counts[e] ?? 0) + 1;
      // Placed by the key, not by the weighted turns: its next turn goes to the same endpoint.
      expect(await turn(gw.url, history, 'And then?')).toEqual({ endpoint: e, affinity: 'hit' });
    }
    // d's share is 5 of 8: 250 of 400, give or take 10 (one standard deviation: the endpoints' ids
    // hash their URLs, whose ports change from run to run). Five either side never fails by chance.
    expect(counts.d).toBeGreaterThan(200);
    expect(counts.d).toBeLessThan(300);
  });
});
