// Connection errors fail over to the next endpoint with the same request; nothing is retried
// once a response byte reached the client.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { FakeBackend } from '../fakes/index.js';
import { endpoint, startGateway, type Started } from '../helpers/gateway.js';
import { timedChunks } from '../helpers/http.js';

let primary: FakeBackend, secondary: FakeBackend, gw: Started | null = null;

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
    // The refused endpoint is out of rotation at once: the next request goes straight to secondary.
    expect(gw.gw.runtime.endpoints.all[0].state).toBe('unhealthy');
    expect(gw.logs.some((l) => l.endpoint === 'primary' && l.failure === 'refused')).toBe(true);
  });

  it('fails over when the connection is reset before any response byte', async () => {
    gw = await start();
    primary.behaviour.resetBeforeResponse = true;
    const res = await request(`${gw.url}/gw/localrunner/api/tags`);
    await res.body.dump();
    expect(res.statusCode).toBe(200);
    expect(res.headers['x-gw-endpoint']).toBe('secondary');
  });

  it('does not retry once a byte reached the client: a mid-stream reset ends the client stream', async () => {
    gw = await start();
    primary.reply = 'one two three four five six';
    primary.behaviour.resetAfterChunks = 2;
    const r = await timedChunks(`${gw.url}/gw/localrunner/api/chat`, { body: JSON.stringify({ model: 'test-model', messages: [], stream: true }) });
    expect(r.status).toBe(200);
    expect(r.headers['x-gw-endpoint']).toBe('primary');
    expect(r.error).toBeDefined();
    const text = r.chunks.map((c) => c.text).join('');
    expect(text).toContain('"content":"one"');
    expect(text).not.toContain('"done":true');
    expect(secondary.traffic).toHaveLength(0);
  });

  it('answers 503 naming the provider and the failure count when every endpoint refuses', async () => {
    gw = await start();
    await primary.stop();
    await secondary.stop();
    const res = await request(`${gw.url}/gw/localrunner/api/chat`, { method: 'POST', body });
    const err = (await res.body.json()) as any;
    expect(res.statusCode).toBe(503);
    expect(err.error.type).toBe('endpoint_unavailable');
    expect(err.error.message).toContain('localrunner');
    expect(err.error.message).toContain('2 endpoints failed to connect');
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
    const down = await request(`${gw.url}/gw/localrunner/api/tags`);
    await down.body.dump();
    expect(down.statusCode).toBe(503);
    await primary.start();
    const deadline = Date.now() + 5000;
    let status = 0;
    while (Date.now() < deadline && status !== 200) {
      await new Promise((r) => setTimeout(r, 100));
      const res = await request(`${gw.url}/gw/localrunner/api/tags`);
      await res.body.dump();
      status = res.statusCode;
    }
    expect(status).toBe(200);
  });
});

describe('what is retried and what is not', () => {
  it('fails a POST over when the connection is reset before the backend took it', async () => {
    gw = await start();
    primary.behaviour.resetOnRequest = true;
    const res = await request(`${gw.url}/gw/localrunner/api/chat`, { method: 'POST', body });
    await res.body.dump();
    expect(res.statusCode).toBe(200);
    expect(res.headers['x-gw-endpoint']).toBe('secondary');
    expect(primary.executions + secondary.executions).toBe(1);
  });

  it('does not run a POST twice when the backend read it and then died', async () => {
    gw = await start();
    primary.behaviour.resetBeforeResponse = true;
    const res = await request(`${gw.url}/gw/localrunner/api/chat`, { method: 'POST', body });
    const err = (await res.body.json()) as any;
    expect(res.statusCode).toBe(502);
    expect(err.error.type).toBe('bad_gateway');
    expect(err.error.message).toContain('not retried');
    expect(primary.executions).toBe(1);
    expect(secondary.executions).toBe(0);
  });

  it('retries once on a fresh connection when a reused keep-alive socket was closed under the request', async () => {
    gw = await start();
    primary.behaviour.closeReusedSockets = true;
    const first = await request(`${gw.url}/gw/localrunner/api/chat`, { method: 'POST', body });
    await first.body.dump();
    const second = await request(`${gw.url}/gw/localrunner/api/chat`, { method: 'POST', body });
    await second.body.dump();
    expect(second.statusCode).toBe(200);
    expect(second.headers['x-gw-endpoint']).toBe('primary');
    expect(primary.executions).toBe(2);
    expect(gw.gw.runtime.endpoints.all[0].state).toBe('healthy');
  });

  it('answers 504 when no reply head arrives within response_timeout, without retrying', async () => {
    gw = await start({ proxy: { response_timeout: '300ms' } });
    primary.behaviour.delayMs = 1000;
    const res = await request(`${gw.url}/gw/localrunner/api/chat`, { method: 'POST', body });
    const err = (await res.body.json()) as any;
    expect(res.statusCode).toBe(504);
    expect(err.error.type).toBe('gateway_timeout');
    expect(secondary.traffic).toHaveLength(0);
  });

  it('cuts a stream whose backend goes quiet for longer than stream_idle_timeout', async () => {
    // undici checks body timeouts on a coarse (about 1 s) timer: leave it room.
    gw = await start({ proxy: { stream_idle_timeout: '300ms' } });
    primary.reply = 'one two three';
    primary.behaviour.chunkDelayMs = 2500;
    const r = await timedChunks(`${gw.url}/gw/localrunner/api/chat`, { body: JSON.stringify({ model: 'test-model', messages: [] }) });
    expect(r.status).toBe(200);
    expect(r.error).toBeDefined();
    expect(r.chunks.length).toBe(1);
  });
});
