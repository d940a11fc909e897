import { describe, expect, it } from 'vitest';
import selectEndpoint, { STRATEGIES } from '../../plugins/select-endpoint.js';
import type { Endpoint } from '../../engine/backends/endpoints.js';
import { applyPlugin, profiles, stubContext, testEnv } from '../helpers/plugin.js';

const ep = (name: string, priority: number, active = 0) => ({ name, priority, active, state: 'healthy' }) as unknown as Endpoint;
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
  it('gives Busy and Warming endpoints only what the Healthy ones cannot take', async () => {
    const busy = { name: 'busy', priority: 100, active: 0, state: 'busy' } as unknown as Endpoint;
    const healthy = { name: 'ok', priority: 1, active: 0, state: 'healthy' } as unknown as Endpoint;
    const endpoints = { routable: () => [busy, healthy], endpoints: () => [] };
    const hooks = applyPlugin(selectEndpoint, { strategy: 'priority' }, testEnv({ profile: profiles.byName.get('mlxmulti'), endpoints: endpoints as never }));
    const { ctx } = stubContext(hooks);
    await hooks.request.promise(ctx);
    expect(names(ctx.candidates)).toBe('okbusy');
  });

  it('puts the ordered candidates on the context', async () => {
    const endpoints = { routable: () => [ep('a', 1), ep('b', 9)], endpoints: () => [] };
    const hooks = applyPlugin(selectEndpoint, { strategy: 'priority' }, testEnv({ profile: profiles.byName.get('mlxmulti'), endpoints: endpoints as never }));
    const { ctx } = stubContext(hooks);
    await hooks.request.promise(ctx);
    expect(names(ctx.candidates)).toBe('ba');
  });
});
