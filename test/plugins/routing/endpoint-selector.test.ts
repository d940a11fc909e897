// Endpoint selection's parts on their own, over the real registry and catalogue (no HTTP, no
// pipeline): one family or all, the last resort, the route filter, and the selector's plans.
import { afterAll, describe, expect, it } from 'vitest';
import { Catalogue } from '../../../engine/backends/catalogue.js';
import { planEndpoints } from '../../../engine/backends/endpoint-plans.js';
import type { Endpoint, HealthState } from '../../../engine/backends/endpoints.js';
import { EndpointRegistry } from '../../../engine/backends/registry.js';
import { loadConfig, type GatewayConfig } from '../../../engine/core/config.js';
import { gwError } from '../../../engine/core/errors.js';
import type { ModelRoute } from '../../../engine/routing/plan.js';
import { EndpointSelector, type SelectorOptions } from '../../../plugins/routing/endpoint-selector.js';
import { downIn, familiesOf } from '../../../plugins/routing/families.js';
import { lastResortOf, meanwhile } from '../../../plugins/routing/last-resort.js';
import { RouteFilter } from '../../../plugins/routing/route-filter.js';
import { writeConfig } from '../../helpers/gateway.js';
import { profiles, stubContext, testEnv } from '../../helpers/plugin.js';
import { createHooks } from '../../../engine/kernel/hooks.js';

const BREAKER = { healthFailures: 3, proxyFailures: 5, initialOpenMs: 1000, maxOpenMs: 30_000, jitter: 0 };
const registries: EndpointRegistry[] = [];
afterAll(() => Promise.all(registries.map((r) => r.close())));

/** Endpoints (name, type, state, models) in a registry and a catalogue, and a plugin env over them. */
function world(list: [name: string, type: string, state: HealthState, models: string[]][], config: Record<string, unknown> = {}) {
  const file = writeConfig({
    ...config,
    discovery: { static: { endpoints: list.map(([name, type], i) => ({ name, type, url: `http://127.0.0.1:${9000 + i}` })) } },
  });
  const cfg: GatewayConfig = loadConfig(file, {}).config;
  const registry = new EndpointRegistry({ markFailed() {}, markAnswered() {} });
  registries.push(registry);
  registry.reconcile(planEndpoints(cfg, profiles, file).plans, BREAKER);
  const catalogue = new Catalogue(() => registry.all);
  catalogue.reconcile([]);
  const by = new Map<string, Endpoint>();
  list.forEach(([name, , state, models], i) => {
    const ep = registry.all[i];
    by.set(name, ep);
    registry.setState(ep, state);
    catalogue.set(
      ep,
      models.map((m) => ({ name: m, details: {} })),
    );
  });
  const env = (profile?: string) =>
    testEnv({
      config: cfg,
      endpoints: registry,
      catalogue,
      profile: profile ? profiles.byName.get(profile) : undefined,
      discovery: { refresh: async () => [] } as never,
      residency: undefined as never,
    });
  return { registry, catalogue, by, env };
}

const OPTIONS: SelectorOptions = { model_routing: true, unavailable: 'refuse', by_route: false, also_via: [], strategy: 'priority', affinity: false };
const request = (body: object, url = '/v1/chat/completions', requested: ModelRoute | null = null) => {
  const { ctx } = stubContext(createHooks(), { method: 'POST', url });
  // What read-body and alias-resolve leave on the context.
  ctx.body = Buffer.from(JSON.stringify(body));
  ctx.requested = requested;
  return ctx;
};
const names = (eps: readonly { endpoint: Endpoint }[]) => eps.map((c) => c.endpoint.name);

describe('one family or all (families.ts)', () => {
  const w = world([
    ['p1', 'pagedengine', 'healthy', ['m']],
    ['p2', 'pagedengine', 'offline', ['m']],
    ['r1', 'radixengine', 'healthy', ['n']],
  ]);

  it('one family: its label, its endpoints, its catalogue', () => {
    const f = familiesOf(w.env('pagedengine'));
    expect(f.label).toBe('pagedengine');
    expect(f.routable().map((e) => e.name)).toEqual(['p1']);
    expect(f.configured().map((e) => e.name)).toEqual(['p1', 'p2']);
    expect(f.configuredCount()).toBe(2);
    expect(f.servedBy('n')).toEqual([]);
    expect(f.known()).toBe(true);
    expect(downIn(f).map((e) => e.name)).toEqual(['p2']);
  });

  it('every family: no label, every endpoint, every list', () => {
    const f = familiesOf(w.env());
    expect(f.label).toBeUndefined();
    expect(f.routable().map((e) => e.name)).toEqual(['p1', 'r1']);
    expect(f.configuredCount()).toBe(3);
    expect(f.servedBy('n').map((e) => e.name)).toEqual(['r1']);
  });
});

describe('the last resort (last-resort.ts)', () => {
  const w = world([
    ['a', 'pagedengine', 'offline', ['x']],
    ['b', 'pagedengine', 'unhealthy', ['y']],
  ]);
  const [a, b] = [w.by.get('a')!, w.by.get('b')!];
  const serves = (e: Endpoint, n: string) => w.catalogue.servedBy(e.family, n).includes(e);

  it('takes the first down endpoint serving the first name it can, sent that name for an alias', () => {
    expect(lastResortOf([a, b], undefined, 'y', false, serves)).toEqual({ ep: b, model: undefined });
    expect(lastResortOf([a, b], ['z', 'y'], 'alias', false, serves)).toEqual({ ep: b, model: 'y' });
  });

  it('with nothing routable in the family, any down endpoint will do; otherwise none serving the name is no resort', () => {
    expect(lastResortOf([a, b], undefined, 'z', false, serves)).toBeUndefined();
    expect(lastResortOf([a, b], undefined, 'z', true, serves)).toEqual({ ep: a, model: undefined });
    expect(lastResortOf([], undefined, 'x', true, serves)).toBeUndefined();
  });

  it('meanwhile: the 503 says when the next try goes, while no down endpoint is ready for one', () => {
    const err = gwError('ENDPOINT_UNAVAILABLE', { provider: 'pagedengine' });
    expect(meanwhile(err, [a])).toBe(err); // ready: nothing to wait for
    a.breaker.admitLastResort();
    const waiting = meanwhile(err, [a]);
    // A test request out: a whole initial period (1 s here), however late the clock is read.
    expect(waiting.message).toMatch(/a request is testing it now: retry in 1s$/);
    expect(waiting.headers).toEqual(['retry-after', '1']);
  });
});

describe('the route filter (route-filter.ts, by_route)', () => {
  const w = world([
    ['l', 'localrunner', 'healthy', ['m', 'only-l']],
    ['p', 'pagedengine', 'healthy', ['m']],
  ]);
  const serving = (n: string) => w.catalogue.servedByAny(n);

  it('serves: a family with the route, or with one the terminal step translates to', () => {
    const plain = new RouteFilter([]);
    expect(plain.serves(w.by.get('p')!, '/v1/rerank')).toBe(true);
    expect(plain.serves(w.by.get('l')!, '/v1/rerank')).toBe(false);
    expect(new RouteFilter(['/v1/chat/completions']).serves(w.by.get('l')!, '/v1/rerank')).toBe(true);
  });

  it('notServed: 404 ROUTE_NOT_SERVED only when every endpoint serving the names lacks the route', () => {
    const f = new RouteFilter([]);
    expect(f.notServed('/v1/rerank', 'm', undefined, serving)).toBeUndefined();
    expect(f.notServed('/v1/rerank', 'nothing', undefined, serving)).toBeUndefined();
    expect(f.notServed('/v1/rerank', undefined, undefined, serving)).toBeUndefined();
    expect(f.notServed('/v1/rerank', 'only-l', undefined, serving)).toMatchObject({
      key: 'ROUTE_NOT_SERVED',
      status: 404,
      message: expect.stringContaining('localrunner'),
    });
    // An alias whose real names include one served with the route is served.
    expect(f.notServed('/v1/rerank', 'nick', ['only-l', 'm'], serving)).toBeUndefined();
  });
});

describe('the selector (endpoint-selector.ts), routing strictly by the catalogue', () => {
  const strict = { model_registry: { routing_strategy: { type: 'strict' } } };
  it("a model: the endpoints serving it, in the strategy's order; its decision on the plan", async () => {
    const w = world(
      [
        ['low', 'pagedengine', 'healthy', ['m']],
        ['high', 'pagedengine', 'healthy', ['m']],
        ['other', 'pagedengine', 'healthy', ['n']],
      ],
      strict,
    );
    const { plan, error } = await new EndpointSelector(w.env('pagedengine'), OPTIONS).select(request({ model: 'm' }));
    expect(error).toBeUndefined();
    expect(names(plan.candidates).sort()).toEqual(['high', 'low']);
    expect(plan.routing).toMatchObject({ decision: 'routed', reason: 'model_found' });
  });

  it('an unknown model: a rejected plan and 404 MODEL_NOT_FOUND naming the family', async () => {
    const w = world([['a', 'pagedengine', 'healthy', ['m']]], strict);
    const { plan, error } = await new EndpointSelector(w.env('pagedengine'), OPTIONS).select(request({ model: 'zzz' }));
    expect(plan.candidates).toEqual([]);
    expect(plan.routing).toMatchObject({ decision: 'rejected', reason: 'model_not_found' });
    expect(error?.key).toBe('MODEL_NOT_FOUND');
    expect(error?.message).toContain('pagedengine');
  });

  it('a model served only by an endpoint out of rotation: that endpoint as a last resort', async () => {
    const w = world(
      [
        ['up', 'pagedengine', 'healthy', ['n']],
        ['down', 'pagedengine', 'offline', ['m']],
      ],
      strict,
    );
    const { plan } = await new EndpointSelector(w.env('pagedengine'), OPTIONS).select(request({ model: 'm' }));
    expect(names(plan.candidates)).toEqual(['down']);
    expect(plan.candidates[0].why).toBe('last_resort');
    expect(plan.routing?.reason).toBe('last_resort');
  });

  it('unavailable: continue — no candidates and no error, for a step that answers without a backend', async () => {
    const w = world(
      [
        ['up', 'pagedengine', 'healthy', ['n']],
        ['down', 'pagedengine', 'offline', ['m']],
      ],
      strict,
    );
    const { plan, error } = await new EndpointSelector(w.env('pagedengine'), { ...OPTIONS, unavailable: 'continue' }).select(request({ model: 'm' }));
    expect(error).toBeUndefined();
    expect(plan.candidates).toEqual([]);
    expect(plan.routing?.reason).toBe('model_unavailable');
  });

  it('nothing routable and nothing to try: 503 ENDPOINT_UNAVAILABLE naming each endpoint and the fix', async () => {
    const w = world([['down', 'pagedengine', 'unknown', ['m']]], strict);
    // Thrown at once: there is no plan to record.
    expect(() => new EndpointSelector(w.env('pagedengine'), OPTIONS).select(request({ model: 'm' }))).toThrow(
      expect.objectContaining({ key: 'ENDPOINT_UNAVAILABLE', message: expect.stringContaining('down at http://127.0.0.1:9000') }),
    );
  });

  it('an alias: the endpoints serving its real names, each sent its own', async () => {
    const w = world(
      [
        ['a', 'pagedengine', 'healthy', ['real-a']],
        ['b', 'pagedengine', 'healthy', ['real-b']],
      ],
      strict,
    );
    const route: ModelRoute = { requested: 'nick', groups: [{ name: 'nick', targets: ['real-a', 'real-b'] }] };
    const { plan } = await new EndpointSelector(w.env('pagedengine'), OPTIONS).select(request({ model: 'nick' }, undefined, route));
    expect(plan.candidates.map((c) => [c.endpoint.name, c.model, c.why]).sort()).toEqual([
      ['a', 'real-a', 'alias'],
      ['b', 'real-b', 'alias'],
    ]);
  });

  it("a fallback chain: the primary's endpoints, then the fallback's, the boundary marked", async () => {
    const w = world(
      [
        ['a', 'pagedengine', 'healthy', ['big']],
        ['b', 'pagedengine', 'healthy', ['small']],
      ],
      strict,
    );
    const route: ModelRoute = {
      requested: 'big',
      groups: [
        { name: 'big', targets: null },
        { name: 'small', targets: null },
      ],
    };
    const { plan } = await new EndpointSelector(w.env('pagedengine'), OPTIONS).select(request({ model: 'big' }, undefined, route));
    expect(plan.candidates.map((c) => [c.endpoint.name, c.model, c.why])).toEqual([
      ['a', 'big', 'requested'],
      ['b', 'small', 'fallback'],
    ]);
    expect(plan.fallbackFrom).toBe(1);
  });

  it('a model-management route: any routable endpoint of the family, whatever the model', async () => {
    const w = world([['l', 'localrunner', 'healthy', ['m']]], strict);
    const { plan } = await new EndpointSelector(w.env('localrunner'), OPTIONS).select(request({ model: 'not-pulled-yet' }, '/api/pull'));
    expect(names(plan.candidates)).toEqual(['l']);
    expect(plan.routing?.reason).toBe('model_management');
  });
});
