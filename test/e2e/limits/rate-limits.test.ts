// Rate limits (issue 11 item 2; spec "Limits"): global, per-IP, the health route's own limit,
// the elevated internal limit, burst, per-endpoint limits of the hosted family; 429 in the
// route's error format with Retry-After and X-RateLimit-*; X-Forwarded-For only from trusted
// proxies; memory bounded under address rotation. Time is a clock the test moves by hand, so
// every threshold is reached by sending exactly that many requests.
import { writeFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { FakeBackend } from '../../../engine/demo/index.js';
import { closeAll, endpoint, startGateway, type Started } from '../../helpers/gateway.js';
import { rawRequest, type RawReply } from '../../helpers/http.js';
import { waitFor } from '../../helpers/wait.js';

let gw: Started | null = null;
let fakes: FakeBackend[] = [];
let now = 0;
const clock = () => now;
afterEach(async () => {
  await closeAll(gw, fakes);
  [gw, fakes, now] = [null, [], 0];
});

const OFF = {
  global_requests_per_minute: 0,
  per_ip_requests_per_minute: 0,
  health_requests_per_minute: 0,
  internal_requests_per_minute: 0,
  per_endpoint: { default_requests_per_minute: 0 },
};

async function start(limits: Record<string, unknown>, endpoints: Record<string, unknown>[] = []) {
  gw = await startGateway({ server: { rate_limits: { ...OFF, ...limits } }, discovery: { static: { endpoints } } }, {}, clock);
  if (endpoints.length) await waitFor(() => gw!.gw.backends.endpoints.all.every((e) => e.state === 'healthy'), 'the endpoints to be healthy');
}

const get = (path: string, headers: Record<string, string> = {}) => rawRequest(`${gw!.url}${path}`, { headers });
const counts = () => gw!.gw.backends.stats.rateLimited;

/** `n` requests in a row, each expected to pass; their X-RateLimit-Remaining values. */
async function pass(n: number, send: () => Promise<RawReply>): Promise<string[]> {
  const remaining: string[] = [];
  for (let i = 0; i < n; i++) {
    const r = await send();
    expect(r.status, r.body).toBeLessThan(400);
    remaining.push(String(r.headers['x-ratelimit-remaining']));
  }
  return remaining;
}

function expectLimited(r: RawReply, limit: number, retryAfter: number, code = 'RATE_LIMITED') {
  expect(r.status, r.body).toBe(429);
  expect(r.headers['retry-after']).toBe(String(retryAfter));
  expect(r.headers['x-ratelimit-limit']).toBe(String(limit));
  expect(r.headers['x-ratelimit-remaining']).toBe('0');
  expect(Number(r.headers['x-ratelimit-reset'])).toBeGreaterThanOrEqual(retryAfter);
  const body = JSON.parse(r.body);
  if (body.type === 'error') expect(body.error).toMatchObject({ type: 'rate_limit_error', code });
  // localrunner's native routes: the text alone, which names the wait.
  else if (typeof body.error === 'string') expect(body.error).toContain(`retry after ${retryAfter}s`);
  else expect(body.error).toMatchObject({ type: 'rate_limited', code });
}

describe('per-IP limit and burst', () => {
  it('lets a burst through, answers the next request 429 with the headers, and refills at the per-minute rate', async () => {
    await start({ per_ip_requests_per_minute: 100, burst_size: 5 });
    expect(await pass(5, () => get('/version'))).toEqual(['4', '3', '2', '1', '0']);
    const refused = await get('/version');
    // 100 a minute: a token every 600 ms; the empty bucket is full again in 5 × 600 ms.
    expectLimited(refused, 100, 1);
    expect(refused.headers['x-ratelimit-reset']).toBe('3');
    expect(counts().ip).toBe(1);
    now += 599;
    expectLimited(await get('/version'), 100, 1);
    now += 1;
    expect((await get('/version')).status).toBe(200);
    expectLimited(await get('/version'), 100, 1);
    expect(counts()).toMatchObject({ ip: 3, global: 0 });
  });

  it('counts every route of an address together and answers in the route format, with CORS headers', async () => {
    const fake = await new FakeBackend({ family: 'localrunner', name: 'local' }).start();
    fakes = [fake];
    await start({ per_ip_requests_per_minute: 60, burst_size: 3 }, [endpoint('local', 'localrunner', fake.url)]);
    await pass(1, () => get('/version'));
    await pass(1, () => get('/gw/models'));
    await pass(1, () => get('/gw/localrunner/api/tags'));
    const proxied = await get('/gw/localrunner/api/tags', { origin: 'https://app.example' });
    expectLimited(proxied, 60, 1);
    expect(proxied.headers['access-control-allow-origin']).toBe('*');
    expect(proxied.headers['access-control-expose-headers']).toContain('X-RateLimit-Remaining');
    const msg = await rawRequest(`${gw!.url}/gw/msgapi/v1/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"model":"m","max_tokens":1,"messages":[]}',
    });
    expectLimited(msg, 60, 1);
    // A preflight is answered before the limit: browsers send one before each request they count.
    expect(
      (
        await rawRequest(`${gw!.url}/gw/localrunner/api/tags`, {
          method: 'OPTIONS',
          headers: { origin: 'https://app.example', 'access-control-request-method': 'GET' },
        })
      ).status,
    ).toBe(204);
  });
});

describe('the health route and the internal routes', () => {
  it('exempts the health route from the per-IP limit: it has its own', async () => {
    await start({ per_ip_requests_per_minute: 100, health_requests_per_minute: 1000, burst_size: 3 });
    await pass(3, () => get('/version'));
    expectLimited(await get('/version'), 100, 1);
    const health = await pass(3, () => get('/internal/health'));
    expect(health).toEqual(['2', '1', '0']);
    expect((await get('/internal/health')).headers['x-ratelimit-limit']).toBe('1000');
    expect(counts()).toMatchObject({ ip: 1, health: 1 });
    // The health limit is its own bucket: still counted against nobody else's.
    expectLimited(await get('/version'), 100, 1);
  });

  it('gives the internal routes the elevated internal limit instead of the per-IP one', async () => {
    await start({ per_ip_requests_per_minute: 100, internal_requests_per_minute: 1000, burst_size: 2 });
    await pass(2, () => get('/version'));
    expectLimited(await get('/version'), 100, 1);
    const first = await get('/internal/status');
    expect(first.status).toBe(200);
    expect(first.headers['x-ratelimit-limit']).toBe('1000');
    await pass(1, () => get('/internal/status/endpoints'));
    // 1000 a minute: a token every 60 ms.
    expectLimited(await get('/internal/process'), 1000, 1);
    expect(counts()).toMatchObject({ ip: 1, internal: 1 });
    now += 60;
    expect((await get('/internal/status')).status).toBe(200);
  });
});

describe('global limit', () => {
  it('counts every route and every address together, but the health route', async () => {
    await start({ global_requests_per_minute: 1000, per_ip_requests_per_minute: 100, burst_size: 4, trust_proxy_headers: true });
    // Four different clients (through a trusted proxy), each far from its own limit.
    for (let i = 1; i <= 3; i++) expect((await get('/version', { 'x-forwarded-for': `203.0.113.${i}` })).status).toBe(200);
    expect((await get('/internal/status', { 'x-forwarded-for': '203.0.113.4' })).status).toBe(200);
    // The global bucket is empty; liveness probes still pass (health has its own limit).
    for (let i = 0; i < 3; i++) expect((await get('/internal/health', { 'x-forwarded-for': '203.0.113.9' })).status).toBe(200);
    const refused = await get('/version', { 'x-forwarded-for': '203.0.113.5' });
    expectLimited(refused, 1000, 1);
    expect(JSON.parse(refused.body).error.message).toContain('global');
    expectLimited(await get('/internal/status', { 'x-forwarded-for': '203.0.113.6' }), 1000, 1);
    expect(counts()).toMatchObject({ global: 2, ip: 0 });
    // The refused clients' own tokens were given back: 203.0.113.5 still has its whole burst.
    now += 60 * 4;
    expect(await pass(1, () => get('/version', { 'x-forwarded-for': '203.0.113.5' }))).toEqual(['3']);
  });
});

describe('the client address', () => {
  const limits = { per_ip_requests_per_minute: 100, burst_size: 2 };

  it('takes X-Forwarded-For from a trusted proxy: the right-most address that is not a trusted proxy', async () => {
    await start({ ...limits, trust_proxy_headers: true, trusted_proxy_cidrs: ['127.0.0.0/8', '10.0.0.0/8'] });
    await pass(2, () => get('/version', { 'x-forwarded-for': '198.51.100.1' }));
    expectLimited(await get('/version', { 'x-forwarded-for': '198.51.100.1' }), 100, 1);
    // What a client writes left of the proxy's entry changes nothing; trusted hops are skipped.
    expectLimited(await get('/version', { 'x-forwarded-for': '1.1.1.1, 198.51.100.1' }), 100, 1);
    expectLimited(await get('/version', { 'x-forwarded-for': '198.51.100.1, 10.1.2.3' }), 100, 1);
    expectLimited(await get('/version', { 'x-forwarded-for': '198.51.100.1:4711' }), 100, 1);
    expectLimited(await get('/version', { 'x-forwarded-for': '::ffff:198.51.100.1' }), 100, 1);
    // Another client is its own bucket.
    expect((await get('/version', { 'x-forwarded-for': '198.51.100.2' })).status).toBe(200);
    await pass(1, () => get('/version', { 'x-forwarded-for': '2001:db8::7' }));
    await pass(1, () => get('/version', { 'x-forwarded-for': '[2001:db8::7]:443' }));
    expectLimited(await get('/version', { 'x-forwarded-for': '2001:db8::7' }), 100, 1);
  });

  it('counts an IPv6 client per /64: one host holds the whole /64', async () => {
    await start({ ...limits, trust_proxy_headers: true });
    await pass(1, () => get('/version', { 'x-forwarded-for': '2001:db8:1:2::a' }));
    await pass(1, () => get('/version', { 'x-forwarded-for': '2001:db8:1:2:ffff:0:0:b' }));
    expectLimited(await get('/version', { 'x-forwarded-for': '2001:DB8:1:2::c' }), 100, 1);
    // The next /64 is another client.
    await pass(1, () => get('/version', { 'x-forwarded-for': '2001:db8:1:3::a' }));
  });

  it('ignores X-Forwarded-For from a peer outside trusted_proxy_cidrs', async () => {
    await start({ ...limits, trust_proxy_headers: true, trusted_proxy_cidrs: ['10.0.0.0/8'] });
    await pass(1, () => get('/version', { 'x-forwarded-for': '198.51.100.1' }));
    await pass(1, () => get('/version', { 'x-forwarded-for': '198.51.100.2' }));
    expectLimited(await get('/version', { 'x-forwarded-for': '198.51.100.3' }), 100, 1);
  });

  it('ignores X-Forwarded-For unless trust_proxy_headers is on', async () => {
    await start(limits);
    await pass(1, () => get('/version', { 'x-forwarded-for': '198.51.100.1' }));
    await pass(1, () => get('/version', { 'x-forwarded-for': '198.51.100.2' }));
    expectLimited(await get('/version', { 'x-forwarded-for': '198.51.100.3' }), 100, 1);
  });

  it('keeps memory bounded when a client rotates addresses', async () => {
    await start({ ...limits, trust_proxy_headers: true, max_tracked_clients: 20 });
    const store = gw!.gw.backends.buckets.stores.ip;
    for (let i = 0; i < 200; i++) {
      expect((await get('/version', { 'x-forwarded-for': `2001:db8:${i.toString(16)}::1` })).status).toBe(200);
      expect(store.size).toBeLessThanOrEqual(20);
    }
    expect(store.size).toBeGreaterThan(0);
  });

  it('refuses a trusted_proxy_cidrs entry that is not a range, naming it', async () => {
    await expect(start({ trust_proxy_headers: true, trusted_proxy_cidrs: ['127.0.0.0/8', '10.0.0.0/33'] })).rejects.toThrow(
      /trusted_proxy_cidrs\[1\].*prefix length "33"/s,
    );
  });
});

describe('hot reload', () => {
  it('keeps the buckets across a reload and applies new limits at once', async () => {
    await start({ per_ip_requests_per_minute: 100, burst_size: 2 });
    await pass(2, () => get('/version'));
    expectLimited(await get('/version'), 100, 1);
    const reload = async (limits: Record<string, unknown>) => {
      writeFileSync(
        gw!.configFile,
        stringify({
          server: { host: '127.0.0.1', port: 0, rate_limits: { ...OFF, ...limits } },
          pipelines: { dir: '/nonexistent/pipelines', watch: false },
          proxy: { profiles_dir: '/nonexistent/profiles' },
        }),
      );
      expect(await gw!.gw.reload('test')).toBe(true);
    };
    // The same limit on a new graph: the address's bucket is still empty.
    await reload({ per_ip_requests_per_minute: 100, burst_size: 2, health_requests_per_minute: 5 });
    expectLimited(await get('/version'), 100, 1);
    // A new rate applies from the next request: 6000 a minute is a token every 10 ms.
    await reload({ per_ip_requests_per_minute: 6000, burst_size: 2 });
    now += 10;
    expect((await get('/version')).headers['x-ratelimit-limit']).toBe('6000');
    await reload({});
    expect(await pass(3, () => get('/version'))).toEqual(['undefined', 'undefined', 'undefined']);
  });
});

describe('per-endpoint limits (hosted family)', () => {
  const CHAT = JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] });
  const chat = () => rawRequest(`${gw!.url}/gw/hosted/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: CHAT });

  it('skips a hosted endpoint whose bucket is empty for another one, and answers 429 when none has room', async () => {
    fakes = await Promise.all(['h1', 'h2'].map((name) => new FakeBackend({ family: 'hosted-compatible', name, models: [{ name: 'gpt-4o-mini' }] }).start()));
    await start({ burst_size: 2, per_endpoint: { default_requests_per_minute: 200 } }, [
      endpoint('h1', 'hosted', fakes[0].url, { priority: 100 }),
      endpoint('h2', 'hosted', fakes[1].url, { priority: 50, requests_per_minute: 30 }),
    ]);
    const served: string[] = [];
    for (let i = 0; i < 4; i++) {
      const r = await chat();
      expect(r.status, r.body).toBe(200);
      served.push(String(r.headers['x-gw-endpoint']));
    }
    expect(served).toEqual(['h1', 'h1', 'h2', 'h2']);
    const refused = await chat();
    // h1 (200 a minute: a token every 300 ms) has room soonest.
    expectLimited(refused, 200, 1, 'ENDPOINT_RATE_LIMITED');
    expect(JSON.parse(refused.body).error.message).toContain('h1, h2');
    expect(counts().endpoint).toBe(1);
    now += 300;
    expect((await chat()).headers['x-gw-endpoint']).toBe('h1');
    // Health checks and the model routes the gateway answers take no token.
    expect((await get('/gw/hosted/v1/models')).status).toBe(200);
  });

  it('limits any endpoint that sets requests_per_minute, and no family without a profile default', async () => {
    const local = await new FakeBackend({ family: 'localrunner', name: 'local' }).start();
    const paged = await new FakeBackend({ family: 'pagedengine', name: 'paged' }).start();
    fakes = [local, paged];
    await start({ burst_size: 2 }, [endpoint('local', 'localrunner', local.url, { requests_per_minute: 6 }), endpoint('paged', 'pagedengine', paged.url)]);
    await pass(2, () => get('/gw/localrunner/api/version'));
    // 6 a minute: a token every 10 s.
    expectLimited(await get('/gw/localrunner/api/version'), 6, 10, 'ENDPOINT_RATE_LIMITED');
    await pass(5, () => get('/gw/pagedengine/health'));
  });
});
