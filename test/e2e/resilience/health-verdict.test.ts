// Health that means what it says: a client's mistakes (4xx) never count against an endpoint or the
// system; /internal/health and /internal/status give one verdict for the same facts; the access log
// shows the path the client sent, whichever step refused it; /internal/ready (issue 22) says
// whether to send the gateway traffic at all.
import { afterEach, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { FakeBackend } from '../../../engine/demo/index.js';
import { closeAll, endpoint, NO_RATE_LIMITS, startGateway, type Started } from '../../helpers/gateway.js';
import { sample } from '../../helpers/prom.js';
import { waitFor } from '../../helpers/wait.js';

let gw: Started | null = null;
let fakes: FakeBackend[] = [];
afterEach(async () => {
  await closeAll(gw, fakes);
  [gw, fakes] = [null, []];
});

const get = async (path: string) => {
  const res = await request(`${gw!.url}${path}`);
  const text = await res.body.text();
  return path === '/internal/metrics' ? text : JSON.parse(text);
};
const post = async (path: string, body: unknown) => {
  const res = await request(`${gw!.url}${path}`, {
    method: 'POST',
    body: typeof body === 'string' ? body : JSON.stringify(body),
    headers: { 'content-type': 'application/json' },
  });
  await res.body.dump();
  return res.statusCode;
};
const chat = (model: string) => ({ model, messages: [{ role: 'user', content: 'hi' }] });

describe('client errors', () => {
  it('count neither against the endpoint nor against the system: a healthy llama-server stays healthy', async () => {
    fakes = [await new FakeBackend({ family: 'cppengine', name: 'c' }).start()];
    gw = await startGateway({
      server: { request_limits: { max_body_size: 1024 } },
      proxy: { retry: { on_statuses: [] } }, // the 500 below is one attempt, passed through
      discovery: { static: { endpoints: [endpoint('llama', 'cppengine', fakes[0].url)] } },
    });
    const model = await waitFor(
      async () => (await get('/gw/models?provider=cppengine')).models[0]?.id as string | undefined,
      'the catalogue to list a cppengine model',
    );
    const statuses: number[] = [];
    for (let i = 0; i < 6; i++) statuses.push(await post('/gw/cppengine/v1/chat/completions', chat(model)));
    statuses.push(await post('/gw/cppengine/v1/chat/completions', chat('no-such-model'))); // 404 MODEL_NOT_FOUND, gateway
    statuses.push(await post('/gw/cppengine/v1/chat/nope', chat(model))); // 404 PATH_NOT_ALLOWED, gateway
    statuses.push(await post('/gw/cppengine/v1/chat/completions', chat('x'.repeat(2048)))); // 413 BODY_TOO_LARGE, gateway
    fakes[0].behaviour.status = 400; // the backend's own 400 (a bad parameter)
    statuses.push(await post('/gw/cppengine/v1/chat/completions', chat(model)));
    expect(statuses).toEqual([200, 200, 200, 200, 200, 200, 404, 404, 413, 400]);

    const status = await get('/internal/status');
    expect(status.statistics).toMatchObject({ requests_total: 10, requests_failed: 0, requests_client_errors: 4 });
    expect(status.system).toMatchObject({ status: 'healthy', has_traffic: true, success_rate: '100.00%' });
    expect(status.endpoints.llama).toMatchObject({ healthy: true, status: 'healthy', errors: 0, client_errors: 1 });
    const detail = (await get('/internal/status/endpoints')).endpoints[0];
    expect(detail).toMatchObject({ name: 'llama', errors: 0, client_errors: 1, error_rate: '0.00%' });
    expect((await get('/internal/health')).status).toBe('healthy');
    const metrics = await get('/internal/metrics');
    expect(sample(metrics, 'gw_system_status', { status: 'healthy' })).toBe(1);
    expect(sample(metrics, 'gw_proxied_requests_failed_total')).toBe(0);
    expect(sample(metrics, 'gw_proxied_requests_client_errors_total')).toBe(4);
    expect(sample(metrics, 'gw_endpoint_errors_total', { endpoint: 'llama' })).toBe(0);
    expect(sample(metrics, 'gw_endpoint_client_errors_total', { endpoint: 'llama' })).toBe(1);

    // A failure still counts: the backend's 500.
    fakes[0].behaviour.status = 500;
    expect(await post('/gw/cppengine/v1/chat/completions', chat(model))).toBe(500);
    const after = await get('/internal/status');
    expect(after.statistics).toMatchObject({ requests_total: 11, requests_failed: 1 });
    // Of the 7 requests that were not client errors, 6 succeeded.
    expect(after.system).toMatchObject({ success_rate: '85.71%', status: 'degraded' });
    expect(after.endpoints.llama).toMatchObject({ errors: 1 });
  });
});

describe('/internal/health and /internal/status', () => {
  it('give the same verdict and the same endpoint states for the same facts', async () => {
    fakes = [await new FakeBackend({ family: 'pagedengine', name: 'p' }).start()];
    gw = await startGateway({
      proxy: { retry: { on_statuses: [] } }, // each 500 is one attempt, passed through
      discovery: { static: { endpoints: [endpoint('gpu', 'pagedengine', fakes[0].url), endpoint('dead', 'pagedengine', 'http://127.0.0.1:1')] } },
    });
    await waitFor(async () => {
      const h = await get('/internal/health');
      return h.endpoints.every((e: any) => e.last_check !== null) && h.endpoints.find((e: any) => e.name === 'gpu').status === 'healthy';
    }, 'both endpoints checked, gpu healthy');
    const both = async () => [await get('/internal/health'), await get('/internal/status')];

    let [health, status] = await both();
    expect([health.status, status.system.status]).toEqual(['degraded', 'degraded']);
    // The outage: every request fails (the gpu's 500s; the dead one is offline).
    fakes[0].behaviour.status = 500;
    for (let i = 0; i < 3; i++) expect(await post('/gw/pagedengine/v1/chat/completions', chat('test-model'))).toBe(500);
    [health, status] = await both();
    expect(status.system).toMatchObject({ status: 'critical', success_rate: '0.00%' });
    expect(health.status).toBe('unhealthy'); // the spec's word on this route for critical
    for (const name of ['gpu', 'dead']) {
      const record = health.endpoints.find((e: any) => e.name === name);
      const entry = status.endpoints[name];
      expect(record.status === 'healthy').toBe(entry.healthy);
      expect(record.state).toBe(entry.status);
    }
    expect(health.endpoints.find((e: any) => e.name === 'dead')).toMatchObject({ status: 'unhealthy', state: 'offline' });
    expect(sample(await get('/internal/metrics'), 'gw_system_status', { status: 'critical' })).toBe(1);
  });
});

describe('access log', () => {
  it('shows the path the client sent for a request refused before its prefix was matched', async () => {
    fakes = [await new FakeBackend({ family: 'cppengine', name: 'c' }).start()];
    gw = await startGateway({
      server: { rate_limits: { ...NO_RATE_LIMITS, per_ip_requests_per_minute: 1, burst_size: 1 } },
      discovery: { static: { endpoints: [endpoint('llama', 'cppengine', fakes[0].url)] } },
    });
    const statuses = [];
    for (let i = 0; i < 2; i++) statuses.push(await post('/gw/cppengine/v1/chat/completions?key=SECRET', chat('cppengine-model-1')));
    expect(statuses[1]).toBe(429);
    const lines = await waitFor(() => {
      const found = gw!.logs.filter((l) => l.msg === 'request' && l.method === 'POST');
      return found.length === 2 ? found : undefined;
    }, 'two access-log lines');
    expect(lines.map((l) => [l.status, l.path])).toEqual([
      [statuses[0], '/gw/cppengine/v1/chat/completions'],
      [429, '/gw/cppengine/v1/chat/completions'],
    ]);
    expect(JSON.stringify(gw.logs)).not.toContain('SECRET');
  });

  it('shows the generic proxy path as sent, prefix included', async () => {
    fakes = [await new FakeBackend({ family: 'pagedengine', name: 'p' }).start()];
    gw = await startGateway({ discovery: { static: { endpoints: [endpoint('gpu', 'pagedengine', fakes[0].url)] } } });
    await waitFor(async () => (await get('/internal/health')).status === 'healthy', 'gpu healthy');
    await post('/gw/proxy/v1/chat/completions', chat('test-model'));
    const line = await waitFor(() => gw!.logs.find((l) => l.msg === 'request' && l.method === 'POST'), 'the access-log line');
    expect(line.path).toBe('/gw/proxy/v1/chat/completions');
  });
});

describe('GET /internal/ready, the readiness probe: 200 while an endpoint is routable and the gateway is not shutting down, 503 with the reason otherwise', () => {
  const probe = async (path: string) => {
    const res = await request(`${gw!.url}${path}`);
    return { status: res.statusCode, body: (await res.body.json()) as Record<string, unknown>, headers: res.headers };
  };

  it('is ready while an endpoint is routable, not while none is, and says why; liveness stays 200', async () => {
    fakes = [await new FakeBackend({ family: 'cppengine', name: 'llama' }).start()];
    gw = await startGateway({ discovery: { static: { endpoints: [endpoint('llama', 'cppengine', fakes[0].url, { check_interval: '1s' })] } } });
    const ep = gw.gw.runtime.endpoints.all[0];
    await waitFor(() => ep.routable || undefined, 'llama routable');
    expect(await probe('/internal/ready')).toMatchObject({
      status: 200,
      body: { ready: true, routable_endpoints: 1, endpoints: 1 },
      headers: { 'cache-control': 'no-cache' },
    });
    fakes[0].behaviour.healthStatus = 500;
    await waitFor(() => !ep.routable || undefined, 'llama out of rotation');
    expect(await probe('/internal/ready')).toMatchObject({
      status: 503,
      body: { ready: false, reason: 'no endpoint is routable (1 configured)', routable_endpoints: 0 },
    });
    expect((await probe('/internal/health')).status).toBe(200);
    fakes[0].behaviour.healthStatus = 200;
    await waitFor(() => ep.routable || undefined, 'llama back');
    expect((await probe('/internal/ready')).status).toBe(200);
  });

  it('is not ready with no endpoint configured, nor while draining', async () => {
    gw = await startGateway({ discovery: { static: { endpoints: [] } } });
    expect(await probe('/internal/ready')).toMatchObject({ status: 503, body: { ready: false, reason: 'no endpoint is configured' } });
    await closeAll(gw, []);
    fakes = [await new FakeBackend({ family: 'cppengine', name: 'llama' }).start()];
    gw = await startGateway({ discovery: { static: { endpoints: [endpoint('llama', 'cppengine', fakes[0].url)] } } });
    await waitFor(() => gw!.gw.runtime.endpoints.all[0].routable || undefined, 'llama routable');
    gw.gw.backends.stats.draining = true;
    expect(await probe('/internal/ready')).toMatchObject({
      status: 503,
      body: { ready: false, reason: 'draining: the gateway is shutting down', routable_endpoints: 1 },
    });
    gw.gw.backends.stats.draining = false;
    // Shutting down: close() marks the gateway draining before it stops listening.
    let release!: () => void;
    fakes[0].behaviour.holdUntil = new Promise((r) => (release = r));
    const held = request(`${gw.url}/gw/cppengine/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: fakes[0].models[0].name, messages: [{ role: 'user', content: 'hi' }] }),
    });
    await waitFor(() => (gw!.gw.backends.stats.inFlight > 0 ? true : undefined), 'a request held');
    const closing = gw.gw.close();
    expect(gw.gw.backends.stats.draining).toBe(true);
    release();
    await (await held).body.dump();
    await closing;
    gw = null;
  });
});
