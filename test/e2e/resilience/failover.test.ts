// Connection errors fail over to the next endpoint with the same request; nothing is retried
// once a response byte reached the client.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { FakeBackend } from '../../../engine/demo/index.js';
import { endpoint, startGateway, type Started } from '../../helpers/gateway.js';
import { timedChunks } from '../../helpers/http.js';
import { waitFor } from '../../helpers/wait.js';

let primary: FakeBackend,
  secondary: FakeBackend,
  gw: Started | null = null;

beforeEach(async () => {
  primary = await new FakeBackend({ family: 'localrunner', name: 'primary' }).start();
  secondary = await new FakeBackend({ family: 'localrunner', name: 'secondary' }).start();
});
afterEach(async () => {
  await gw?.close();
  gw = null;
  await primary.stop();
  await secondary.stop();
});

// Health checks far apart, so only the proxy path can notice a failure during the test.
const start = (extra: Record<string, unknown> = {}) =>
  startGateway({
    ...extra,
    discovery: {
      static: {
        endpoints: [
          endpoint('primary', 'localrunner', primary.url, { priority: 100, check_interval: '60s' }),
          endpoint('secondary', 'localrunner', secondary.url, { priority: 50, check_interval: '60s' }),
        ],
      },
    },
  });

const body = JSON.stringify({ model: 'test-model', messages: [{ role: 'user', content: 'hello' }], stream: false });

describe('failover', () => {
  it('retries a refused request on the next endpoint: the client sees 200 and the body arrives intact', async () => {
    gw = await start();
    await primary.stop();
    const res = await request(`${gw.url}/gw/localrunner/api/chat`, { method: 'POST', body });
    const reply = (await res.body.json()) as any;
    expect(res.statusCode).toBe(200);
    expect(res.headers['x-gw-endpoint']).toBe('secondary');
    expect(reply.message.content).toBe('Hello from secondary');
    expect(secondary.traffic[0].text).toBe(body);
    // The refused endpoint is out of rotation at once (its immediate re-check finds it Offline).
    expect(gw.gw.runtime.endpoints.all[0].routable).toBe(false);
    expect(gw.logs.some((l) => l.endpoint === 'primary' && l.failure === 'refused')).toBe(true);
  });

  it('fails over when the connection is reset before any response byte', async () => {
    gw = await start();
    primary.behaviour.resetBeforeResponse = true;
    const res = await request(`${gw.url}/gw/localrunner/api/version`);
    await res.body.dump();
    expect(res.statusCode).toBe(200);
    expect(res.headers['x-gw-endpoint']).toBe('secondary');
  });

  it('does not retry once a byte reached the client: a mid-stream reset ends the stream with an error line', async () => {
    gw = await start();
    primary.reply = 'one two three four five six';
    primary.behaviour.resetAfterChunks = 2;
    const r = await timedChunks(`${gw.url}/gw/localrunner/api/chat`, { body: JSON.stringify({ model: 'test-model', messages: [], stream: true }) });
    expect(r.status).toBe(200);
    expect(r.headers['x-gw-endpoint']).toBe('primary');
    const lines = r.chunks
      .map((c) => c.text)
      .join('')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(lines[0].message.content).toBe('one');
    expect(lines.at(-1).error).toMatch(/endpoint primary broke off the reply/);
    expect(lines.some((l) => l.done === true)).toBe(false);
    expect(secondary.traffic).toHaveLength(0);
  });

  it('answers 503 naming the provider and the failure count when every endpoint refuses', async () => {
    gw = await start();
    await primary.stop();
    await secondary.stop();
    const res = await request(`${gw.url}/gw/localrunner/api/chat`, { method: 'POST', body });
    const err = (await res.body.json()) as any;
    expect(res.statusCode).toBe(503);
    // The native route's shape: the text alone.
    expect(err.error).toMatch(/^no healthy endpoint for provider localrunner/);
    expect(err.error).toContain('2 endpoints failed (last: refused)');
  });

  it('stops after proxy.max_retries further endpoints', async () => {
    gw = await start({ proxy: { max_retries: 0 } });
    await primary.stop();
    const res = await request(`${gw.url}/gw/localrunner/api/chat`, { method: 'POST', body });
    await res.body.dump();
    expect(res.statusCode).toBe(503);
    expect(secondary.traffic).toHaveLength(0);
  });

  it('routes to an endpoint again once its health check passes after a restart on the same port', async () => {
    gw = await startGateway({
      discovery: { static: { endpoints: [endpoint('primary', 'localrunner', primary.url, { check_interval: '100ms' })] } },
    });
    await primary.stop();
    const down = await request(`${gw.url}/gw/localrunner/api/version`);
    await down.body.dump();
    expect(down.statusCode).toBe(503);
    await primary.start();
    await waitFor(async () => {
      const res = await request(`${gw!.url}/gw/localrunner/api/version`);
      await res.body.dump();
      return res.statusCode === 200;
    }, 'the restarted endpoint to be routed to again');
  });

  it('checks an endpoint again at once when a request marked it unhealthy: a healthy backend is back long before check_interval', async () => {
    // One endpoint, checked every 60 s; one request fails twice over (pooled and fresh connection).
    gw = await startGateway({ discovery: { static: { endpoints: [endpoint('primary', 'localrunner', primary.url, { check_interval: '60s' })] } } });
    const ep = gw.gw.runtime.endpoints.all[0];
    const checks = primary.requestsTo('/').length;
    primary.behaviour.resetOnRequest = true;
    const failed = await request(`${gw.url}/gw/localrunner/api/chat`, { method: 'POST', body });
    await failed.body.dump();
    expect(failed.statusCode).toBe(503);
    primary.behaviour.resetOnRequest = false;
    // The re-check is what brings it back: the next scheduled one is a minute away.
    await waitFor(() => ep.state === 'healthy', 'the endpoint to be healthy again');
    expect(primary.requestsTo('/').length).toBeGreaterThan(checks);
    expect(gw.logs.some((l) => l.msg === 'endpoint recovered' && l.endpoint === 'primary')).toBe(true);
    const ok = await request(`${gw.url}/gw/localrunner/api/chat`, { method: 'POST', body });
    await ok.body.dump();
    expect(ok.statusCode).toBe(200);
  });
});
