// Circuit breakers over real HTTP: open after proxy failures, skip without touching stored
// health, one test request in half-open even under concurrency, client-caused statuses ignored.
import { afterEach, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { FakeBackend } from '../../../engine/demo/index.js';
import type { Endpoint } from '../../../engine/backends/endpoints.js';
import { BreakerOpen } from '../../../engine/backends/failures.js';
import { closeAll, endpoint, startGateway, type Started } from '../../helpers/gateway.js';
import { waitFor } from '../../helpers/wait.js';

let gw: Started | null = null;
let fakes: FakeBackend[] = [];
afterEach(async () => {
  await closeAll(gw, fakes);
  [gw, fakes] = [null, []];
});

/** `openTimeout`: every open period (no growth, no jitter), so a test knows when it ends. Status
 *  retries are off: each request here is one attempt (test/e2e/resilience/resilience-*.test.ts has them). */
async function setup(n: number, openTimeout = '30s') {
  fakes = await Promise.all(Array.from({ length: n }, (_, i) => new FakeBackend({ family: 'pagedengine', name: `f${i}` }).start()));
  gw = await startGateway({
    proxy: { circuit_breaker: { open_timeout: openTimeout, initial_open_timeout: openTimeout, jitter: 0 }, retry: { on_statuses: [] } },
    discovery: { static: { endpoints: fakes.map((f, i) => endpoint(f.name, 'pagedengine', f.url, { priority: 100 - i, check_interval: '60s' })) } },
  });
  return gw.gw.runtime.endpoints.all;
}

const chat = (g: Started) => request(`${g.url}/gw/pagedengine/v1/chat/completions`, { method: 'POST', body: '{"model":"test-model","messages":[]}' });
async function send(g: Started) {
  const res = await chat(g);
  const body = (await res.body.json()) as any;
  return { status: res.statusCode, endpoint: res.headers['x-gw-endpoint'], body };
}

/** One request straight through the endpoint's send path (what the attempt loop does per attempt). */
function dispatch(ep: Endpoint): Promise<number | string> {
  return new Promise((resolve) => {
    let status = 0;
    ep.dispatch(
      {
        path: '/v1/chat/completions',
        method: 'POST',
        body: '{"model":"test-model","messages":[]}',
        headers: { 'content-type': 'application/json' },
        replaySafe: true,
      },
      {
        onResponseStart: (_c, s) => void (status = s),
        onResponseData: () => undefined,
        onResponseEnd: () => resolve(status),
        onResponseError: (_c, e) => resolve(e instanceof BreakerOpen ? 'BreakerOpen' : e.message),
      },
    );
  });
}

describe('circuit breaker', () => {
  it('opens after 5 consecutive 5xx replies and then skips the endpoint, leaving its health alone', async () => {
    const [a] = await setup(2);
    fakes[0].behaviour.status = 500;
    for (let i = 0; i < 5; i++) expect(await send(gw!)).toMatchObject({ status: 500, endpoint: 'f0' });
    expect(a.breaker.state).toBe('open');
    expect(await send(gw!)).toMatchObject({ status: 200, endpoint: 'f1' });
    expect(a.state).toBe('healthy');
    expect(fakes[0].traffic).toHaveLength(5);
  });

  it('with no alternative, answers 503 circuit_breaker at once with the time to the test request, sending nothing', async () => {
    const [a] = await setup(1);
    fakes[0].behaviour.status = 502;
    for (let i = 0; i < 5; i++) await send(gw!);
    expect(a.breaker.state).toBe('open');
    fakes[0].reset();
    for (let i = 0; i < 3; i++) {
      const res = await chat(gw!);
      const body = (await res.body.json()) as any;
      expect(res.statusCode).toBe(503);
      expect(body.error).toMatchObject({ type: 'circuit_breaker', code: 503 });
      expect(body.error.message).toContain('1 skipped');
      const wait = Number(res.headers['retry-after']);
      expect(wait).toBeGreaterThan(0);
      expect(wait).toBeLessThanOrEqual(30);
    }
    expect(fakes[0].traffic).toHaveLength(0);
  });

  it('says how many were skipped and how many failed when both happen', async () => {
    await setup(2);
    fakes[0].behaviour.status = 500;
    for (let i = 0; i < 5; i++) await send(gw!);
    await fakes[1].stop();
    const r = await send(gw!);
    expect(r.status).toBe(503);
    expect(r.body.error.type).toBe('endpoint_unavailable');
    expect(r.body.error.message).toContain('1 endpoint failed (last: refused)');
    expect(r.body.error.message).toContain('1 skipped for an open circuit breaker');
  });

  it('lets exactly one test request through when half-open, even under 50 concurrent requests', async () => {
    const [a] = await setup(1, '300ms');
    fakes[0].behaviour.status = 500;
    for (let i = 0; i < 5; i++) await send(gw!);
    expect(a.breaker.state).toBe('open');
    fakes[0].reset();
    // The test request is held at the backend until the 49 others have been answered.
    let release!: () => void;
    fakes[0].behaviour.holdUntil = new Promise<void>((r) => (release = r));
    await waitFor(() => a.breaker.state === 'half-open', 'the breaker to turn half-open');
    const all = Array.from({ length: 50 }, () => send(gw!));
    const refused: Awaited<ReturnType<typeof send>>[] = [];
    for (const p of all) void p.then((r) => r.status === 503 && refused.push(r));
    await waitFor(() => refused.length === 49, '49 requests refused while the test request runs');
    release();
    const results = await Promise.all(all);
    expect(fakes[0].traffic).toHaveLength(1);
    expect(results.filter((r) => r.status === 200)).toHaveLength(1);
    expect(results.filter((r) => r.status === 503 && r.body.error.type === 'circuit_breaker')).toHaveLength(49);
    expect(a.breaker.state).toBe('closed');
    expect((await send(gw!)).status).toBe(200);
  });

  it('reopens when the test request fails', async () => {
    const [a] = await setup(1, '200ms');
    fakes[0].behaviour.status = 500;
    for (let i = 0; i < 5; i++) await send(gw!);
    await waitFor(() => a.breaker.state === 'half-open', 'the breaker to turn half-open');
    expect((await send(gw!)).status).toBe(500);
    expect(a.breaker.state).toBe('open');
  });

  it('keeps a breaker opened by proxy failures open through a passing health check; its test request closes it', async () => {
    const [a] = await setup(1, '300ms');
    fakes[0].behaviour.status = 500;
    for (let i = 0; i < 5; i++) await send(gw!);
    expect(a.breaker).toMatchObject({ state: 'open', openedBy: 'proxy' });
    fakes[0].reset();
    await gw!.gw.runtime.health.check(a); // the check its schedule would run next
    expect(a.breaker.state).not.toBe('closed');
    expect(await dispatch(a)).toBe('BreakerOpen');
    expect(fakes[0].traffic).toHaveLength(0);
    await waitFor(() => a.breaker.state === 'half-open', 'the breaker to turn half-open');
    expect(await send(gw!)).toMatchObject({ status: 200, endpoint: 'f0' });
    expect(a.breaker.state).toBe('closed');
  });

  it('closes a breaker opened by failing health checks at the next passing one', async () => {
    const [a] = await setup(1);
    for (let i = 0; i < 3; i++) a.breaker.healthFailure();
    expect(a.breaker).toMatchObject({ state: 'open', openedBy: 'health' });
    await gw!.gw.runtime.health.check(a);
    expect(a.breaker.state).toBe('closed');
    expect(await send(gw!)).toMatchObject({ status: 200, endpoint: 'f0' });
  });

  it('shows on the status route when an open breaker lets its test request through, and how many openings in a row', async () => {
    const [a] = await setup(1);
    fakes[0].behaviour.status = 500;
    for (let i = 0; i < 5; i++) await send(gw!);
    const res = await request(`${gw!.url}/internal/status/endpoints`);
    const view = ((await res.body.json()) as any).endpoints[0].circuit_breaker;
    expect(view).toMatchObject({ state: 'open', opened_by: 'proxy', consecutive_openings: 1 });
    expect(Date.parse(view.open_until) - Date.parse(view.opened_at)).toBe(30_000);
    expect(view.open_until).toBe(new Date(a.breaker.openUntil).toISOString());
  });

  it('never counts client-caused statuses', async () => {
    const [a] = await setup(1);
    fakes[0].behaviour.status = 404;
    for (let i = 0; i < 6; i++) expect((await send(gw!)).status).toBe(404);
    fakes[0].behaviour.status = 400;
    for (let i = 0; i < 6; i++) expect((await send(gw!)).status).toBe(400);
    expect(a.breaker.state).toBe('closed');
    expect(a.breaker.proxyFailures).toBe(0);
  });

  it('does not count a client that went away', async () => {
    const [a] = await setup(1);
    fakes[0].behaviour.delayMs = 300;
    for (let i = 0; i < 6; i++) {
      const ac = new AbortController();
      const pending = request(`${gw!.url}/gw/pagedengine/v1/chat/completions`, { method: 'POST', body: '{}', signal: ac.signal }).catch(() => undefined);
      await new Promise((r) => setTimeout(r, 30));
      ac.abort();
      await pending;
    }
    await new Promise((r) => setTimeout(r, 350));
    expect(a.breaker.state).toBe('closed');
    expect(a.breaker.proxyFailures).toBe(0);
    expect(a.state).toBe('healthy');
  });
});
