// GET /internal/ready, the readiness probe (issue 22): 200 while some endpoint is routable and
// the gateway is not shutting down; 503 with the reason otherwise — no endpoint configured, none
// routable, draining. /internal/health (the liveness probe) answers 200 through all of it.
import { afterEach, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { FakeBackend } from '../../engine/demo/index.js';
import { closeAll, endpoint, startGateway, type Started } from '../helpers/gateway.js';
import { waitFor } from '../helpers/wait.js';

let gw: Started | null = null;
let fakes: FakeBackend[] = [];
afterEach(async () => {
  await closeAll(gw, fakes);
  [gw, fakes] = [null, []];
});

const get = async (path: string) => {
  const res = await request(`${gw!.url}${path}`);
  return { status: res.statusCode, body: (await res.body.json()) as Record<string, unknown>, headers: res.headers };
};

describe('GET /internal/ready', () => {
  it('is ready while an endpoint is routable, not while none is, and says why; liveness stays 200', async () => {
    fakes = [await new FakeBackend({ family: 'cppengine', name: 'llama' }).start()];
    gw = await startGateway({ discovery: { static: { endpoints: [endpoint('llama', 'cppengine', fakes[0].url, { check_interval: '1s' })] } } });
    const ep = gw.gw.runtime.endpoints.all[0];
    await waitFor(() => ep.routable || undefined, 'llama routable');
    expect(await get('/internal/ready')).toMatchObject({ status: 200, body: { ready: true, routable_endpoints: 1, endpoints: 1 }, headers: { 'cache-control': 'no-cache' } });
    fakes[0].behaviour.healthStatus = 500;
    await waitFor(() => !ep.routable || undefined, 'llama out of rotation');
    expect(await get('/internal/ready')).toMatchObject({ status: 503, body: { ready: false, reason: 'no endpoint is routable (1 configured)', routable_endpoints: 0 } });
    expect((await get('/internal/health')).status).toBe(200);
    fakes[0].behaviour.healthStatus = 200;
    await waitFor(() => ep.routable || undefined, 'llama back');
    expect((await get('/internal/ready')).status).toBe(200);
  });

  it('is not ready with no endpoint configured, nor while draining', async () => {
    gw = await startGateway({ discovery: { static: { endpoints: [] } } });
    expect(await get('/internal/ready')).toMatchObject({ status: 503, body: { ready: false, reason: 'no endpoint is configured' } });
    await closeAll(gw, []);
    fakes = [await new FakeBackend({ family: 'cppengine', name: 'llama' }).start()];
    gw = await startGateway({ discovery: { static: { endpoints: [endpoint('llama', 'cppengine', fakes[0].url)] } } });
    await waitFor(() => gw!.gw.runtime.endpoints.all[0].routable || undefined, 'llama routable');
    gw.gw.backends.stats.draining = true;
    expect(await get('/internal/ready')).toMatchObject({ status: 503, body: { ready: false, reason: 'draining: the gateway is shutting down', routable_endpoints: 1 } });
    gw.gw.backends.stats.draining = false;
    // Shutting down: close() marks the gateway draining before it stops listening.
    let release!: () => void;
    fakes[0].behaviour.holdUntil = new Promise((r) => (release = r));
    const held = request(`${gw.url}/gw/cppengine/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: fakes[0].models[0].name, messages: [{ role: 'user', content: 'hi' }] }) });
    await waitFor(() => (gw!.gw.backends.stats.inFlight > 0 ? true : undefined), 'a request held');
    const closing = gw.gw.close();
    expect(gw.gw.backends.stats.draining).toBe(true);
    release();
    await (await held).body.dump();
    await closing;
    gw = null;
  });
});
