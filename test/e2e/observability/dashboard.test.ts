// /internal/ui/ over real HTTP: the static files under a strict CSP, the access policy (loopback
// in, a foreign Host or address refused with 403, the status routes never gated), and 503 naming
// the fix when the dashboard is turned off.
import { afterEach, describe, expect, it } from 'vitest';
import { FakeBackend } from '../../../engine/demo/index.js';
import { closeAll, endpoint, NO_RATE_LIMITS, startGateway, type Started } from '../../helpers/gateway.js';
import { rawRequest } from '../../helpers/http.js';

let gw: Started | null = null;
let fakes: FakeBackend[] = [];
afterEach(async () => {
  await closeAll(gw, fakes);
  [gw, fakes] = [null, []];
});

async function start(dashboard?: Record<string, unknown>, server?: Record<string, unknown>) {
  fakes = [await new FakeBackend({ family: 'pagedengine' }).start()];
  gw = await startGateway({
    ...(dashboard ? { dashboard } : {}),
    ...(server ? { server } : {}),
    discovery: { static: { endpoints: [endpoint('gpu', 'pagedengine', fakes[0].url)] } },
  });
}

const get = (path: string, headers: Record<string, string> = {}) => rawRequest(`${gw!.url}${path}`, { headers });
const UNGATED = ['/internal/status', '/internal/status/endpoints', '/internal/status/models', '/internal/health', '/internal/stats/translators', '/version'];

describe('/internal/ui/', () => {
  it('serves the page, its script, its style and uPlot from the gateway under a strict CSP', async () => {
    await start();
    const page = await get('/internal/ui/');
    expect(page.status).toBe(200);
    expect(page.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(page.body).toContain('<script defer src="app.js"></script>');
    expect(page.body).not.toMatch(/<script>|<style|https?:\/\//); // no inline code, nothing from elsewhere
    const csp = String(page.headers['content-security-policy']);
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain("script-src 'self'");
    expect(csp).toContain("connect-src 'self'");
    expect(csp).not.toContain('unsafe');
    expect(page.headers['x-content-type-options']).toBe('nosniff');
    for (const [path, type] of [
      ['app.js', 'text/javascript'],
      ['style.css', 'text/css'],
      ['vendor/uPlot.iife.min.js', 'text/javascript'],
      ['vendor/uPlot.min.css', 'text/css'],
    ]) {
      const file = await get(`/internal/ui/${path}`);
      expect(file.status, path).toBe(200);
      expect(file.headers['content-type'], path).toContain(type);
      expect(file.body.length, path).toBeGreaterThan(100);
    }
    const again = await get('/internal/ui/app.js', { 'if-none-match': String((await get('/internal/ui/app.js')).headers.etag) });
    expect(again.status).toBe(304);
    const bare = await get('/internal/ui?interval=1');
    expect([bare.status, bare.headers.location]).toEqual([308, '/internal/ui/?interval=1']);
    expect((await get('/internal/ui/missing.js')).status).toBe(404);
    expect((await get('/internal/ui/../status')).status).not.toBe(200);
  });

  it('refuses a foreign Host header with 403 naming allowed_hosts; the status routes stay open to it', async () => {
    await start();
    const refused = await get('/internal/ui/', { host: 'dashboard.evil.example' });
    expect(refused.status).toBe(403);
    expect(JSON.parse(refused.body).error).toMatchObject({ type: 'forbidden', code: 'DASHBOARD_FORBIDDEN' });
    expect(JSON.parse(refused.body).error.message).toContain('Host "dashboard.evil.example" is not in dashboard.access_policy.allowed_hosts');
    expect((await get('/internal/ui/vendor/uPlot.iife.min.js', { host: 'dashboard.evil.example' })).status).toBe(403);
    for (const path of UNGATED) expect((await get(path, { host: 'dashboard.evil.example' })).status, path).toBe(200);
    expect((await get('/internal/metrics', { host: 'dashboard.evil.example' })).status).not.toBe(403);
    expect((await get('/internal/ui/', { host: `localhost:${new URL(gw!.url).port}` })).status).toBe(200);
  });

  it('refuses a client address outside allowed_cidrs with 403 naming allowed_cidrs; the status routes stay open', async () => {
    await start({ access_policy: { allowed_cidrs: ['10.0.0.0/8'] } });
    const refused = await get('/internal/ui/');
    expect(refused.status).toBe(403);
    expect(JSON.parse(refused.body).error.message).toContain('client address 127.0.0.1 is not in dashboard.access_policy.allowed_cidrs');
    for (const path of UNGATED) expect((await get(path)).status, path).toBe(200);
  });

  it("behind a trusted proxy, judges the client it forwards, not the proxy's own loopback address", async () => {
    await start(undefined, { rate_limits: { ...NO_RATE_LIMITS, trust_proxy_headers: true, trusted_proxy_cidrs: ['127.0.0.0/8'] } });
    const forwarded = await get('/internal/ui/', { 'x-forwarded-for': '203.0.113.7' });
    expect(forwarded.status).toBe(403);
    expect(JSON.parse(forwarded.body).error.message).toContain('client address 203.0.113.7 is not in dashboard.access_policy.allowed_cidrs');
    expect((await get('/internal/ui/', { 'x-forwarded-for': '127.0.0.1' })).status).toBe(200);
    // A trusted proxy that names no usable client: the client is unknown, not the proxy itself.
    for (const xff of [undefined, 'unknown', '203.0.113.9, unknown']) {
      const r = await get('/internal/ui/', xff === undefined ? {} : { 'x-forwarded-for': xff });
      expect(r.status, String(xff)).toBe(403);
    }
  });

  it('answers 503 naming the fix when dashboard.enabled is false', async () => {
    await start({ enabled: false });
    const off = await get('/internal/ui/');
    expect(off.status).toBe(503);
    expect(JSON.parse(off.body).error).toMatchObject({ type: 'service_unavailable', code: 'DASHBOARD_DISABLED' });
    expect(JSON.parse(off.body).error.message).toContain('set dashboard.enabled: true');
    expect((await get('/internal/status')).status).toBe(200);
  });

  it('refuses to start with an allowed_cidrs entry that is not a CIDR, naming it', async () => {
    fakes = [];
    await expect(startGateway({ dashboard: { access_policy: { allowed_cidrs: ['10.0.0/8'] } } })).rejects.toThrow('"10.0.0/8" is not a CIDR');
  });
});

describe('/internal/stats/translators', () => {
  it('sends a weak ETag and answers 304 when nothing changed (the dashboard polls it)', async () => {
    await start();
    const first = await get('/internal/stats/translators');
    expect(first.headers.etag).toMatch(/^W\/"[0-9a-z]+"$/);
    expect((await get('/internal/stats/translators', { 'if-none-match': String(first.headers.etag) })).status).toBe(304);
  });
});
