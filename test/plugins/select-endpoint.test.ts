import { describe, expect, it } from 'vitest';
import selectEndpoint, { STRATEGIES } from '../../plugins/select-endpoint.js';
import { balancer } from '../../plugins/routing/balancing.js';
import { EndpointQueue } from '../../engine/backends/queue.js';
import type { Endpoint } from '../../engine/backends/endpoints.js';
import { applyPlugin, profiles, stubContext, testEnv } from '../helpers/plugin.js';

/** A stand-in endpoint: weight 1, its load its requests in flight. */
const stub = (fields: Record<string, unknown>) =>
  ({
    weight: 1,
    load(this: { active: number }) {
      return this.active;
    },
    ...fields,
  }) as unknown as Endpoint;
const ep = (name: string, priority: number, active = 0) => stub({ name, priority, active, state: 'healthy' });
/** The balancer with affinity off. */
const plain = (shares: { busy: number; warming: number }) => ({ shares, maxLoadFactor: null, byPriority: true });
const names = (list: readonly Endpoint[]) => list.map((e) => e.name).join('');

describe('balancing strategies', () => {
  it('priority: highest first, the rest in priority order for failover', () => {
    const order = STRATEGIES.priority();
    expect(names(order([ep('a', 10), ep('b', 100), ep('c', 50)]))).toBe('bca');
  });
  it('priority: equal top priorities take turns', () => {
    const order = STRATEGIES.priority();
    const list = [ep('a', 100), ep('b', 100), ep('c', 1)];
    expect([names(order(list)), names(order(list)), names(order(list))]).toEqual(['abc', 'bac', 'abc']);
  });
  it('round-robin: each request starts one further along the ring', () => {
    const order = STRATEGIES['round-robin']();
    const list = [ep('a', 1), ep('b', 1), ep('c', 1)];
    expect([names(order(list)), names(order(list)), names(order(list)), names(order(list))]).toEqual(['abc', 'bca', 'cab', 'abc']);
  });
  it('least-connections: fewest in flight, ties by priority then order', () => {
    const order = STRATEGIES['least-connections']();
    expect(names(order([ep('a', 100, 3), ep('b', 10, 0), ep('c', 50, 0)]))).toBe('cba');
  });
  it('accepts the snake_case synonyms', () => {
    expect(Object.keys(STRATEGIES)).toEqual(expect.arrayContaining(['round_robin', 'least_conn']));
  });
});

describe('select-endpoint', () => {
  it('fails with endpoint_unavailable naming the family when nothing is routable', async () => {
    const endpoints = { routable: () => [], endpoints: () => [ep('a', 1)] };
    const hooks = applyPlugin(selectEndpoint, {}, testEnv({ profile: profiles.byName.get('mlxmulti'), endpoints: endpoints as never }));
    const { ctx } = stubContext(hooks);
    await expect(hooks.request.promise(ctx)).rejects.toMatchObject({ status: 503, type: 'endpoint_unavailable', message: expect.stringContaining('mlxmulti') });
  });
  it('puts a Busy endpoint after the Healthy ones when it is not its turn', async () => {
    const busy = stub({ name: 'busy', priority: 100, active: 0, state: 'busy' });
    const healthy = stub({ name: 'ok', priority: 1, active: 0, state: 'healthy' });
    const endpoints = { routable: () => [busy, healthy], endpoints: () => [] };
    const hooks = applyPlugin(selectEndpoint, { strategy: 'priority' }, testEnv({ profile: profiles.byName.get('mlxmulti'), endpoints: endpoints as never }));
    const { ctx } = stubContext(hooks);
    await hooks.request.promise(ctx);
    expect(names(ctx.plan!.candidates.map((c) => c.endpoint))).toBe('okbusy');
  });

  it('puts the ordered candidates on the context', async () => {
    const endpoints = { routable: () => [ep('a', 1), ep('b', 9)], endpoints: () => [] };
    const hooks = applyPlugin(selectEndpoint, { strategy: 'priority' }, testEnv({ profile: profiles.byName.get('mlxmulti'), endpoints: endpoints as never }));
    const { ctx } = stubContext(hooks);
    await hooks.request.promise(ctx);
    expect(names(ctx.plan!.candidates.map((c) => c.endpoint))).toBe('ba');
  });
});

/** How often each endpoint came first over n orderings. */
function firsts(order: (l: readonly Endpoint[]) => readonly Endpoint[], list: Endpoint[], n: number): Record<string, number> {
  const out: Record<string, number> = {};
  for (let i = 0; i < n; i++) {
    const first = order(list)[0].name;
    out[first] = (out[first] ?? 0) + 1;
  }
  return out;
}

const at = (name: string, priority: number, state: string, queue: EndpointQueue | null = null) => stub({ name, priority, active: 0, state, queue });

describe('state weights (proxy.degraded_traffic)', () => {
  const shares = { busy: 4, warming: 10 };

  it('gives a Busy endpoint exactly 1 in 4 of the first places it would have had', () => {
    const order = balancer(STRATEGIES.priority(), plain(shares));
    const list = [at('busy', 100, 'busy'), at('ok', 10, 'healthy')];
    expect(firsts(order, list, 40)).toEqual({ busy: 10, ok: 30 });
    // The first places it keeps are every 4th, and the Healthy one stays the failover.
    const seq = Array.from({ length: 8 }, () => names(order(list)));
    expect(seq).toEqual(['okbusy', 'okbusy', 'okbusy', 'busyok', 'okbusy', 'okbusy', 'okbusy', 'busyok']);
  });

  it('gives a Warming endpoint exactly 1 in 10', () => {
    const order = balancer(STRATEGIES.priority(), plain(shares));
    expect(firsts(order, [at('warm', 100, 'warming'), at('ok', 10, 'healthy')], 100)).toEqual({ warm: 10, ok: 90 });
  });

  it('reduces, never raises: under round-robin a Busy endpoint keeps 1 in 4 of its turns', () => {
    const order = balancer(STRATEGIES['round-robin'](), plain(shares));
    // Its turns are every other request: it keeps 5 of 20 over 40 requests.
    expect(firsts(order, [at('busy', 1, 'busy'), at('ok', 1, 'healthy')], 40)).toEqual({ busy: 5, ok: 35 });
    // Under priority at a lower priority than a Healthy endpoint, it never comes first.
    const byPriority = balancer(STRATEGIES.priority(), plain(shares));
    expect(firsts(byPriority, [at('busy', 1, 'busy'), at('ok', 100, 'healthy')], 40)).toEqual({ ok: 40 });
  });

  it('0 keeps them behind every Healthy endpoint; without a Healthy one they take everything', () => {
    const never = balancer(STRATEGIES.priority(), plain({ busy: 0, warming: 0 }));
    expect(firsts(never, [at('busy', 100, 'busy'), at('warm', 90, 'warming'), at('ok', 10, 'healthy')], 20)).toEqual({ ok: 20 });
    const order = balancer(STRATEGIES.priority(), plain(shares));
    expect(firsts(order, [at('busy', 100, 'busy'), at('warm', 10, 'warming')], 20)).toEqual({ busy: 20 });
  });
});

describe('capacity', () => {
  it('puts endpoints with a free slot (or no limit) before those whose slots are all held', () => {
    const full = new EndpointQueue({ maxConcurrent: 1, maxQueued: 5, timeoutMs: 1000 });
    full.tryEnter();
    const free = new EndpointQueue({ maxConcurrent: 1, maxQueued: 5, timeoutMs: 1000 });
    const order = balancer(STRATEGIES.priority(), plain({ busy: 4, warming: 10 }));
    expect(names(order([at('a', 100, 'healthy', full), at('b', 50, 'healthy', free), at('c', 10, 'healthy')]))).toBe('bca');
    free.tryEnter();
    expect(names(order([at('a', 100, 'healthy', full), at('b', 50, 'healthy', free), at('c', 10, 'healthy')]))).toBe('cab');
  });
});
