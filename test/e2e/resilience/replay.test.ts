// Replay safety (profile api.replay_safe_paths): an inference request that a connection failure
// cut before the first reply byte goes to the next endpoint, so nothing is lost; a
// model-management request is never sent twice once a backend may have read it.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { FakeBackend } from '../../../engine/demo/index.js';
import { closeAll, endpoint, startGateway, type Started } from '../../helpers/gateway.js';
import { customProfiles } from '../../helpers/profiles.js';

let primary: FakeBackend,
  secondary: FakeBackend,
  gw: Started | null = null;

beforeEach(async () => {
  primary = await new FakeBackend({ family: 'localrunner', name: 'primary' }).start();
  secondary = await new FakeBackend({ family: 'localrunner', name: 'secondary' }).start();
});
afterEach(async () => {
  await closeAll(gw, [primary, secondary]);
  gw = null;
});

// Health checks far apart, so only the proxy path can notice a failure. `replyHeadTimeout` sets
// the family's characteristics.timeout (which wins over proxy.response_timeout) through a custom
// profile, for the tests of a backend that never answers.
const start = (endpoints = [primary, secondary], replyHeadTimeout?: string) =>
  startGateway({
    proxy: replyHeadTimeout ? { profiles_dir: customProfiles({ localrunner: (p) => (p.characteristics.timeout = replyHeadTimeout) }) } : {},
    discovery: {
      static: { endpoints: endpoints.map((f, i) => endpoint(f.name, 'localrunner', f.url, { priority: 100 - i, check_interval: '60s' })) },
    },
  });

const chat = JSON.stringify({ model: 'test-model', messages: [{ role: 'user', content: 'hello' }], stream: false });
const pull = JSON.stringify({ model: 'test-model' });

async function post(path: string, body: string) {
  const res = await request(`${gw!.url}${path}`, { method: 'POST', body });
  const text = await res.body.text();
  return { status: res.statusCode, endpoint: res.headers['x-gw-endpoint'], json: JSON.parse(text) };
}

describe('inference routes are replay-safe: no request is lost', () => {
  it('a backend that read the request and closed the connection: the next endpoint answers, with the same body', async () => {
    gw = await start();
    primary.behaviour.resetBeforeResponse = true;
    const r = await post('/gw/localrunner/api/chat', chat);
    expect(r.status).toBe(200);
    expect(r.endpoint).toBe('secondary');
    expect(secondary.traffic[0].text).toBe(chat);
    expect(secondary.executions).toBe(1);
  });

  it('a backend that accepts and never answers: the next endpoint answers once the reply-head timeout passes', async () => {
    gw = await start(undefined, '2s');
    primary.behaviour.hang = true;
    const r = await post('/gw/localrunner/v1/chat/completions', chat);
    expect(r.status).toBe(200);
    expect(r.endpoint).toBe('secondary');
    expect(primary.requestsTo('/v1/chat/completions')).toHaveLength(1);
    // Counted against the endpoint like a connection error.
    expect(gw.gw.runtime.endpoints.all[0].breaker.proxyFailures).toBe(1);
    expect(
      gw.logs.some((l) => l.endpoint === 'primary' && l.failure === 'timeout (no reply head within 2s, response_timeout from custom profile localrunner)'),
    ).toBe(true);
  });

  it('the messages API too', async () => {
    gw = await start();
    primary.behaviour.resetBeforeResponse = true;
    const r = await post('/gw/msgapi/v1/messages', JSON.stringify({ model: 'test-model', max_tokens: 16, messages: [{ role: 'user', content: 'hi' }] }));
    expect(r.status).toBe(200);
    expect(r.endpoint).toBe('secondary');
    expect(r.json.type).toBe('message');
  });
});

describe('model-management routes are not: never sent twice', () => {
  it('a backend that read the request and closed the connection: 502, and no other backend sees it', async () => {
    gw = await start();
    primary.behaviour.resetBeforeResponse = true;
    const r = await post('/gw/localrunner/api/pull', pull);
    expect(r.status).toBe(502);
    // The native route's shape: the text alone.
    expect(r.json.error).toMatch(/^endpoint primary failed: .*not sent again/);
    expect(primary.requestsTo('/api/pull')).toHaveLength(1);
    expect(secondary.requestsTo('/api/pull')).toHaveLength(0);
  });

  it('a backend that never answers: 504 after the family timeout, not sent to the next endpoint', async () => {
    gw = await start(undefined, '2s');
    primary.behaviour.hang = true;
    const r = await post('/gw/localrunner/api/pull', pull);
    expect(r.status).toBe(504);
    expect(r.json.error).toMatch(/^endpoint primary sent no reply head within 2s/);
    expect(primary.requestsTo('/api/pull')).toHaveLength(1);
    expect(secondary.requestsTo('/api/pull')).toHaveLength(0);
  });

  it('a refused connection (nothing was sent) still goes to the next endpoint', async () => {
    gw = await start();
    await primary.stop();
    const r = await post('/gw/localrunner/api/pull', pull);
    expect(r.status).toBe(200);
    expect(r.endpoint).toBe('secondary');
  });

  it('rides a fresh connection, so a stale pooled socket cannot fail it', async () => {
    gw = await start();
    primary.behaviour.resetReusedSockets = true;
    for (let i = 0; i < 3; i++) {
      const r = await post('/gw/localrunner/api/pull', pull);
      expect(r.status).toBe(200);
      expect(r.endpoint).toBe('primary');
    }
    expect(primary.requestsTo('/api/pull')).toHaveLength(3);
  });
});

describe('stale pooled sockets', () => {
  it('a reset on a reused socket is retried on a fresh connection and is no sign of an outage: 54 of 54 succeed on the only endpoint', async () => {
    gw = await start([primary]);
    const ep = gw.gw.runtime.endpoints.all[0];
    primary.behaviour.resetReusedSockets = true;
    const statuses: number[] = [];
    // Six clients at once, nine requests each: the pool reuses sockets, the backend resets them.
    await Promise.all(
      Array.from({ length: 6 }, async () => {
        for (let i = 0; i < 9; i++) statuses.push((await post('/gw/localrunner/api/chat', chat)).status);
      }),
    );
    expect(statuses).toHaveLength(54);
    expect(statuses.every((s) => s === 200)).toBe(true);
    expect(primary.resetsOnReuse).toBeGreaterThan(0);
    expect(ep.state).toBe('healthy');
    expect(ep.breaker.proxyFailures).toBe(0);
    expect(gw.logs.some((l) => l.msg === 'endpoint unhealthy')).toBe(false);
  });

  it('a reused socket closed under the request is retried once on a fresh connection', async () => {
    gw = await start();
    primary.behaviour.closeReusedSockets = true;
    expect((await post('/gw/localrunner/api/chat', chat)).status).toBe(200);
    const second = await post('/gw/localrunner/api/chat', chat);
    expect(second.status).toBe(200);
    expect(second.endpoint).toBe('primary');
    expect(primary.executions).toBe(2);
    expect(gw.gw.runtime.endpoints.all[0].state).toBe('healthy');
  });
});
