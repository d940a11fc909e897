// The health checker over real HTTP with short intervals.
import { afterEach, describe, expect, it } from 'vitest';
import { backoffDelay, type HealthMonitor } from '../../../engine/backends/health.js';
import { retryAfterMs } from '../../../engine/core/head.js';
import { FakeBackend } from '../../../engine/demo/index.js';
import { closeAll, endpoint, startGateway, type Started } from '../../helpers/gateway.js';

const wait = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** True once the condition holds, within a budget sized for a loaded machine. */
async function until(cond: () => boolean, ms = 30_000) {
  const end = Date.now() + ms;
  while (!cond() && Date.now() < end) await wait(10);
  return cond();
}

let gw: Started | null = null;
let fakes: FakeBackend[] = [];
afterEach(async () => {
  await closeAll(gw, fakes);
  [gw, fakes] = [null, []];
});

async function setup(family: string, extra: Record<string, unknown> = {}, before?: (f: FakeBackend) => void) {
  const fake = await new FakeBackend({ family }).start();
  fakes.push(fake);
  before?.(fake);
  gw = await startGateway({ discovery: { static: { endpoints: [endpoint('e', family, fake.url, extra)] } } });
  return { fake, ep: gw.gw.runtime.endpoints.all[0] };
}

describe('backoff', () => {
  it('follows interval, 2x, 4x, 8x, capped at the lower of 12x and 60 s', () => {
    expect([1, 2, 3, 4, 5, 9].map((n) => backoffDelay(5000, n))).toEqual([5000, 10000, 20000, 40000, 60000, 60000]);
    expect([1, 2, 3, 4, 5, 6].map((n) => backoffDelay(1000, n))).toEqual([1000, 2000, 4000, 8000, 12000, 12000]);
    expect(backoffDelay(1000, 0)).toBe(1000);
  });

  it('spaces real checks of a failing endpoint accordingly', async () => {
    const { fake, ep } = await setup('pagedengine', { check_interval: '100ms', check_timeout: '500ms' }, (f) => (f.behaviour.healthStatus = 500));
    // The delay the monitor chose after each failed check (exact), and when each check ran: the
    // gaps are never shorter than chosen (a loaded machine may make them longer).
    const chosen = [ep.nextCheckAt!.getTime() - ep.lastCheck!.getTime()];
    const ranAt = [ep.lastCheck!.getTime()];
    let checks = ep.checksTotal;
    while (chosen.length < 4 && (await until(() => ep.checksTotal > checks))) {
      checks = ep.checksTotal;
      chosen.push(ep.nextCheckAt!.getTime() - ep.lastCheck!.getTime());
      ranAt.push(ep.lastCheck!.getTime());
    }
    // After failures 1 (at start-up), 2, 3, 4: 100 ms, 200, 400, 800.
    expect(chosen.map((d) => Math.round(d / 10) * 10)).toEqual([100, 200, 400, 800]);
    ranAt.slice(1).forEach((t, i) => expect(t - ranAt[i]).toBeGreaterThanOrEqual(chosen[i] - 20));
    expect(fake.requestsTo('/health').length).toBeGreaterThanOrEqual(4);
  });
});

describe('an endpoint that refuses connections', () => {
  it('is back as soon as it accepts one again: the check is brought forward, not left to its backoff', async () => {
    // A check interval of an hour: only the knocking can bring it back within the test.
    const { fake, ep } = await setup('pagedengine', { check_interval: '1h', check_timeout: '2s' });
    expect(ep.state).toBe('healthy');
    await fake.stop();
    await gw!.gw.runtime.health.check(ep);
    expect(ep.state).toBe('offline');
    expect((gw!.gw.runtime.health as HealthMonitor).knocking(ep)).toBe(true);
    const checks = ep.checksTotal;
    expect(ep.nextCheckAt!.getTime() - Date.now()).toBeGreaterThan(30_000);
    await fake.start();
    expect(await until(() => ep.state === 'healthy')).toBe(true);
    expect(ep.checksTotal).toBe(checks + 1);
  });

  it('one that answers again but is still starting (503 while it loads) is checked every second until it passes', async () => {
    const { fake, ep } = await setup('pagedengine', { check_interval: '1h', check_timeout: '2s' });
    await fake.stop();
    await gw!.gw.runtime.health.check(ep);
    expect(ep.state).toBe('offline');
    fake.behaviour.healthStatus = 503;
    await fake.start();
    expect(await until(() => ep.state === 'unhealthy')).toBe(true);
    expect(ep.lastError).toBe('health check answered 503');
    // Checked again and again at the starting cadence, not after a backed-off minute.
    const failing = ep.checksTotal;
    expect(await until(() => ep.checksTotal > failing + 1)).toBe(true);
    fake.behaviour.healthStatus = 200;
    expect(await until(() => ep.state === 'healthy')).toBe(true);
  });

  it('POST /internal/endpoints/check runs the checks now and answers what each found', async () => {
    const { fake, ep } = await setup('pagedengine', { check_interval: '1h' });
    const checks = ep.checksTotal;
    await fake.stop();
    const res = await fetch(`${gw!.url}/internal/endpoints/check?endpoint=e`, { method: 'POST' });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { checked: { name: string; status: string; routable: boolean; error: string | null }[] };
    expect(body.checked).toEqual([expect.objectContaining({ name: 'e', status: 'offline', routable: false, error: 'ECONNREFUSED' })]);
    expect(ep.checksTotal).toBe(checks + 1);
    expect((await fetch(`${gw!.url}/internal/endpoints/check?endpoint=nope`, { method: 'POST' })).status).toBe(404);
  });

  it('a check that timed out (a hung engine) keeps its backoff: nothing knocks', async () => {
    const { fake, ep } = await setup('pagedengine', { check_interval: '1h', check_timeout: '300ms' });
    fake.behaviour.healthDelayMs = 5_000;
    await gw!.gw.runtime.health.check(ep);
    expect(ep.state).toBe('offline');
    expect(ep.lastError).toBe('timed out');
    expect((gw!.gw.runtime.health as HealthMonitor).knocking(ep)).toBe(false);
    fake.behaviour.healthDelayMs = 0;
  });
});

describe('states', () => {
  it('reads Retry-After as seconds or a date', () => {
    expect(retryAfterMs('3')).toBe(3000);
    expect(retryAfterMs(new Date(Date.now() + 5000).toUTCString(), Date.now())).toBeGreaterThan(3000);
    expect(retryAfterMs('soon')).toBeUndefined();
  });

  it('Unknown becomes Healthy on the first check; a failure makes it Unhealthy, a success routable again at once', async () => {
    const { fake, ep } = await setup('pagedengine', { check_interval: '100ms' });
    expect(ep.state).toBe('healthy');
    const recovered: string[] = [];
    gw!.gw.runtime.endpoints.on('recovered', (e) => recovered.push(e.name));
    fake.behaviour.healthStatus = 500;
    expect(await until(() => ep.state === 'unhealthy')).toBe(true);
    expect(ep.lastError).toBe('health check answered 500');
    fake.behaviour.healthStatus = 200;
    expect(await until(() => ep.state === 'healthy')).toBe(true);
    expect(recovered).toEqual(['e']);
    expect(gw!.logs.some((l) => l.msg === 'endpoint recovered' && l.endpoint === 'e')).toBe(true);
  });

  it('marks a refused endpoint Offline and not routable', async () => {
    const { fake, ep } = await setup('pagedengine', { check_interval: '100ms' });
    await fake.stop();
    expect(await until(() => ep.state === 'offline')).toBe(true);
    expect(ep.routable).toBe(false);
    expect(ep.lastError).toBe('ECONNREFUSED');
  });

  it('treats 429 as Busy (still routable) and waits for Retry-After', async () => {
    const { fake, ep } = await setup('pagedengine', { check_interval: '100ms' });
    fake.behaviour.healthStatus = 429;
    fake.behaviour.healthHeaders = { 'retry-after': '1' };
    expect(await until(() => ep.state === 'busy')).toBe(true);
    expect(ep.routable).toBe(true);
    // The next check is scheduled a Retry-After (1 s) out, not check_interval (100 ms).
    expect(ep.nextCheckAt!.getTime() - ep.lastCheck!.getTime()).toBeGreaterThanOrEqual(1000);
    expect(ep.consecutiveFailures).toBe(0);
  });

  it('treats a sleeping turboengine (503) as transient: Warming, routable, no breaker count', async () => {
    const { fake, ep } = await setup('turboengine', { check_interval: '50ms' });
    fake.behaviour.healthStatus = 503;
    expect(await until(() => ep.state === 'warming')).toBe(true);
    await wait(300);
    expect(ep.routable).toBe(true);
    expect(ep.breaker.state).toBe('closed');
    expect(ep.consecutiveFailures).toBe(0);
  });

  it('treats 401 as a configuration error: not routable, no breaker trip', async () => {
    const { fake, ep } = await setup('hosted', { check_interval: '50ms' });
    fake.behaviour.healthStatus = 401;
    expect(await until(() => ep.state === 'unhealthy')).toBe(true);
    await wait(300);
    expect(ep.breaker.state).toBe('closed');
    expect(ep.lastError).toContain('auth');
  });

  it('opens the breaker after 3 failed checks', async () => {
    const { fake, ep } = await setup('pagedengine', { check_interval: '50ms' });
    fake.behaviour.healthStatus = 500;
    expect(await until(() => ep.breaker.state === 'open')).toBe(true);
    expect(ep.breaker.openedBy).toBe('health');
    fake.behaviour.healthStatus = 200;
    expect(await until(() => ep.state === 'healthy', 5000)).toBe(true);
    expect(ep.breaker.state).toBe('closed');
  });

  it('does not follow a redirect from the health route', async () => {
    const { createServer } = await import('node:http');
    const target = await new FakeBackend({ family: 'pagedengine' }).start();
    fakes.push(target);
    const redirector = createServer((_req, res) => {
      res.writeHead(302, { location: `${target.url}/health` });
      res.end();
    });
    await new Promise<void>((r) => redirector.listen(0, '127.0.0.1', () => r()));
    const port = (redirector.address() as { port: number }).port;
    try {
      gw = await startGateway({ discovery: { static: { endpoints: [endpoint('r', 'pagedengine', `http://127.0.0.1:${port}`)] } } });
      const ep = gw.gw.runtime.endpoints.all[0];
      expect(ep.state).toBe('unhealthy');
      expect(ep.lastError).toBe('health check answered 302');
      expect(target.requestsTo('/health')).toHaveLength(0);
    } finally {
      redirector.close();
    }
  });

  it('finds a containerrunner with an empty model list healthy', async () => {
    const fake = await new FakeBackend({ family: 'containerrunner', models: [] }).start();
    fakes.push(fake);
    gw = await startGateway({ discovery: { static: { endpoints: [endpoint('c', 'containerrunner', fake.url)] } } });
    expect(gw.gw.runtime.endpoints.all[0].state).toBe('healthy');
  });

  it('never piles checks up: one in flight per endpoint', async () => {
    const { fake } = await setup('pagedengine', { check_interval: '20ms', check_timeout: '1s' }, (f) => (f.behaviour.healthDelayMs = 150));
    await wait(800);
    expect(fake.healthMaxInFlight).toBe(1);
    expect(fake.requestsTo('/health').length).toBeLessThan(8);
  });

  it('stops checking on shutdown', async () => {
    const { fake } = await setup('pagedengine', { check_interval: '20ms' });
    await gw!.close();
    gw = null;
    const count = fake.requestsTo('/health').length;
    await wait(200);
    expect(fake.requestsTo('/health').length).toBe(count);
  });
});
