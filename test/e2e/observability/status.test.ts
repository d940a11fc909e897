// The status routes as the spec shapes them: ids, sanitised URLs, ETags, zero-traffic state,
// logging levels, and no secret anywhere.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import v8 from 'node:v8';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { request } from 'undici';
import { fnv1a36 } from '../../../engine/core/hash.js';
import { FakeBackend } from '../../../engine/demo/index.js';
import { closeAll, endpoint, startGateway, type Started } from '../../helpers/gateway.js';

let gw: Started | null = null;
let fakes: FakeBackend[] = [];
afterEach(async () => {
  await closeAll(gw, fakes);
  [gw, fakes] = [null, []];
});

const get = async (path: string, headers: Record<string, string> = {}) => {
  const res = await request(`${gw!.url}${path}`, { headers });
  const text = await res.body.text();
  return { status: res.statusCode, headers: res.headers, text, json: text ? JSON.parse(text) : undefined };
};

async function twoFamilies(extra: Record<string, unknown> = {}) {
  fakes = [await new FakeBackend({ family: 'pagedengine', name: 'p' }).start(), await new FakeBackend({ family: 'localrunner', name: 'l' }).start()];
  gw = await startGateway({
    ...extra,
    discovery: {
      static: {
        endpoints: [
          endpoint('gpu', 'pagedengine', fakes[0].url),
          endpoint('local', 'localrunner', fakes[1].url),
          endpoint('dead', 'mlxsingle', 'http://127.0.0.1:1/base'),
        ],
      },
    },
  });
}

describe('/internal/status', () => {
  it('derives a fresh boot from endpoint health: no traffic, N/A success rate, not critical', async () => {
    fakes = [await new FakeBackend({ family: 'pagedengine' }).start()];
    gw = await startGateway({ discovery: { static: { endpoints: [endpoint('gpu', 'pagedengine', fakes[0].url)] } } });
    const { json } = await get('/internal/status');
    expect(Object.keys(json)).toEqual(['version', 'build', 'config', 'statistics', 'endpoints', 'models', 'reload', 'system']);
    expect(json.config).toEqual({ proxy_engine: 'undici', load_balancer: 'priority', endpoints_configured: 1, models_discovered: 2, tracing: null });
    expect(Object.keys(json.statistics)).toEqual([
      'requests_total',
      'requests_active',
      'requests_failed',
      'requests_client_errors',
      'average_latency',
      'p95_latency',
      'p99_latency',
    ]);
    expect(json.system).toMatchObject({ status: 'healthy', has_traffic: false, success_rate: 'N/A' });
    expect(json.endpoints.gpu).toMatchObject({ healthy: true, models: 2, requests: 0, errors: 0 });
    expect(json.models).toEqual({ total: 2, by_provider: { pagedengine: ['pagedengine-model-1', 'test-model'] } });
  });

  it('counts traffic, failures and latency percentiles', async () => {
    await twoFamilies({ proxy: { retry: { on_statuses: [] } } }); // the 500 is one attempt, passed through
    for (let i = 0; i < 3; i++) await (await request(`${gw!.url}/gw/pagedengine/metrics`)).body.dump();
    fakes[0].behaviour.status = 500;
    await (await request(`${gw!.url}/gw/pagedengine/v1/chat/completions`, { method: 'POST', body: '{}' })).body.dump();
    const { json } = await get('/internal/status');
    expect(json.statistics).toMatchObject({ requests_total: 4, requests_failed: 1, requests_active: 0 });
    expect(json.statistics.p99_latency).toMatch(/ms$/);
    expect(json.system).toMatchObject({ has_traffic: true, success_rate: '75.00%', status: 'degraded' });
    expect(json.endpoints.gpu).toMatchObject({ requests: 4, errors: 1 });
  });
});

describe('/internal/status/endpoints', () => {
  it('gives id, sanitised url, health, counts and breaker state for each endpoint', async () => {
    await twoFamilies();
    const { json } = await get('/internal/status/endpoints');
    const dead = json.endpoints.find((e: any) => e.name === 'dead');
    expect(dead).toMatchObject({
      id: fnv1a36('http://127.0.0.1:1/base'),
      type: 'mlxsingle',
      url: 'http://127.0.0.1:1/base',
      status: 'offline',
      healthy: false,
      routable: false,
      requests: 0,
      errors: 0,
      error_rate: '0.00%',
      consecutive_failures: 1,
      error: 'ECONNREFUSED',
      circuit_breaker: { state: 'closed', consecutive_failures: 0, health_failures: 1, opened_by: null, opened_at: null },
    });
    expect(json.endpoints.find((e: any) => e.name === 'gpu')).toMatchObject({ status: 'healthy', routable: true, uptime_percentage: 100 });
  });
});

describe('endpoint ids', () => {
  it('hash the sanitised URL, number siblings by name, ignore credentials, and match across payloads and restarts', async () => {
    fakes = [await new FakeBackend({ family: 'pagedengine' }).start()];
    const dir = mkdtempSync(join(tmpdir(), 'gw-ids-'));
    writeFileSync(join(dir, 'pw'), 'one');
    const config = (pw: string) => ({
      discovery: {
        static: {
          endpoints: [
            endpoint('zeta', 'pagedengine', `${fakes[0].url}/v1?key=SECRET-Q#frag`),
            endpoint('alpha', 'pagedengine', `${fakes[0].url}/v1`, { auth: { type: 'basic', username: 'u', password: pw } }),
            endpoint('solo', 'pagedengine', `${fakes[0].url}/other`),
          ],
        },
      },
    });
    const hash = fnv1a36(`http://127.0.0.1:${fakes[0].port}/v1`);
    gw = await startGateway(config('first-password'));
    const ids1 = Object.fromEntries((await get('/internal/status/endpoints')).json.endpoints.map((e: any) => [e.name, e.id]));
    expect(ids1).toEqual({ zeta: `${hash}-2`, alpha: `${hash}-1`, solo: fnv1a36(`http://127.0.0.1:${fakes[0].port}/other`) });
    const health = (await get('/internal/health')).json.endpoints.map((e: any) => e.id);
    const status = (await get('/internal/status')).json.endpoints;
    expect(health).toEqual([ids1.zeta, ids1.alpha, ids1.solo]);
    expect(status.zeta.id).toBe(ids1.zeta);
    await gw.close();
    gw = await startGateway(config('changed-password'));
    const ids2 = Object.fromEntries((await get('/internal/status/endpoints')).json.endpoints.map((e: any) => [e.name, e.id]));
    expect(ids2).toEqual(ids1);
    expect((await get('/internal/status/endpoints')).json.endpoints[0].url).toBe(`${fakes[0].url}/v1`);
  });
});

describe('endpoint ids and the url shown', () => {
  it('hash exactly the url the status routes show, however the configured URL is spelled', async () => {
    gw = await startGateway({
      discovery: {
        static: {
          endpoints: [
            endpoint('default-port', 'mlxsingle', 'http://127.0.0.1:80/'),
            endpoint('upper-tls', 'mlxsingle', 'https://LOCALHOST:443/v1/'),
            endpoint('slashes', 'mlxsingle', 'http://127.0.0.1:1/base//?q=1'),
          ],
        },
      },
    });
    const shown = (await get('/internal/status/endpoints')).json.endpoints.map((e: any) => [e.name, e.url, e.id]);
    expect(shown.map(([name, url]: string[]) => [name, url])).toEqual([
      ['default-port', 'http://127.0.0.1'],
      ['upper-tls', 'https://localhost/v1'],
      ['slashes', 'http://127.0.0.1:1/base'],
    ]);
    for (const [, url, id] of shown) expect(id).toBe(fnv1a36(url));
    const health = (await get('/internal/health')).json.endpoints;
    for (const e of health) expect(e.id).toBe(fnv1a36(e.url));
  });
});

describe('ETags', () => {
  it.each(['/internal/status', '/internal/status/endpoints', '/internal/health'])('%s sends a weak ETag and answers 304 to a match', async (path) => {
    await twoFamilies();
    const first = await get(path);
    expect(first.headers.etag).toMatch(/^W\/"[0-9a-z]+"$/);
    const again = await get(path, { 'if-none-match': String(first.headers.etag) });
    expect(again.status).toBe(304);
    expect(again.text).toBe('');
    expect((await get(path, { 'if-none-match': String(first.headers.etag).slice(2) })).status).toBe(304);
    expect((await get(path, { 'if-none-match': `W/"other", ${first.headers.etag}` })).status).toBe(304);
    expect((await get(path, { 'if-none-match': 'W/"other"' })).status).toBe(200);
  });

  it('changes when something stable changes', async () => {
    await twoFamilies();
    const before = (await get('/internal/status/endpoints')).headers.etag;
    await (await request(`${gw!.url}/gw/pagedengine/metrics`)).body.dump();
    expect((await get('/internal/status/endpoints')).headers.etag).not.toBe(before);
  });
});

describe('/internal/process', () => {
  it('reports the process under the spec field names', async () => {
    await twoFamilies();
    const { json } = await get('/internal/process');
    expect(json.pid).toBe(process.pid);
    expect(Object.keys(json.memory)).toEqual([
      'alloc_mb',
      'total_alloc_mb',
      'sys_mb',
      'heap_alloc_mb',
      'heap_objects',
      'heap_objects_age_seconds',
      'gc_runs',
      'gc_pause_ms',
    ]);
    expect(Object.keys(json.cpu)).toEqual(['goroutines', 'threads', 'cpu_percent']);
    expect(json.connections.total_created).toBeGreaterThan(0);
    expect(json.runtime).toMatchObject({ go_version: process.version, os: process.platform, arch: process.arch });
    expect(json.memory.sys_mb).toBeGreaterThan(1);
    // An integer, as the spec has it: 0 with no age until a count is asked for, since counting
    // stops the process for a full garbage collection.
    expect(json.memory).toMatchObject({ heap_objects: 0, heap_objects_age_seconds: null });
    const counted = (await get('/internal/process?heap_objects=count')).json.memory;
    expect(Number.isInteger(counted.heap_objects)).toBe(true);
    expect(counted.heap_objects).toBeGreaterThan(1000);
    expect(Number.isInteger(counted.heap_objects_age_seconds)).toBe(true);
  });

  it('counts heap objects at most once a minute, however often it is asked; every reply shows the last count and its age', async () => {
    await twoFamilies();
    const first = (await get('/internal/process?heap_objects=count')).json.memory;
    const query = vi.spyOn(v8 as unknown as { queryObjects: () => number }, 'queryObjects');
    try {
      for (let i = 0; i < 5; i++) {
        const again = (await get('/internal/process?heap_objects=count')).json.memory;
        expect(again.heap_objects).toBe(first.heap_objects);
        expect(again.heap_objects_age_seconds).toBeGreaterThanOrEqual(first.heap_objects_age_seconds);
      }
      // Asked or not, the reply reports the last count.
      expect((await get('/internal/process')).json.memory.heap_objects).toBe(first.heap_objects);
      expect(query).not.toHaveBeenCalled();
    } finally {
      query.mockRestore();
    }
  });
});

describe('logging', () => {
  it('logs successful status polls at debug, other internal requests and proxied ones at info', async () => {
    await twoFamilies();
    gw!.logs.length = 0;
    await get('/internal/status');
    const etag = (await get('/internal/health')).headers.etag;
    await get('/internal/health', { 'if-none-match': String(etag) });
    await get('/internal/nope');
    await (await request(`${gw!.url}/internal/status`, { method: 'POST', body: '{}' })).body.dump();
    await (await request(`${gw!.url}/gw/localrunner/api/tags`)).body.dump();
    const lines = gw!.logs.filter((l) => l.msg === 'request').map((l) => [l.level, l.method, l.path, l.status]);
    expect(lines).toEqual([
      [20, 'GET', '/internal/status', 200],
      [20, 'GET', '/internal/health', 200],
      [20, 'GET', '/internal/health', 304],
      [30, 'GET', '/internal/nope', 404],
      [30, 'POST', '/internal/status', 404],
      [30, 'GET', '/gw/localrunner/api/tags', 200],
    ]);
  });

  it('honours GW_LOGGING_LEVEL over the file', async () => {
    fakes = [await new FakeBackend({ family: 'localrunner' }).start()];
    gw = await startGateway(
      { logging: { level: 'debug' }, discovery: { static: { endpoints: [endpoint('l', 'localrunner', fakes[0].url)] } } },
      { GW_LOGGING_LEVEL: 'warn' },
    );
    await (await request(`${gw.url}/gw/localrunner/api/tags`)).body.dump();
    expect(gw.logs.filter((l) => l.level < 40)).toEqual([]);
  });
});

describe('secrets', () => {
  it('never appear in a status body or a log line', async () => {
    fakes = [await new FakeBackend({ family: 'hosted-compatible' }).start(), await new FakeBackend({ family: 'pagedengine' }).start()];
    const dir = mkdtempSync(join(tmpdir(), 'gw-secret-'));
    writeFileSync(join(dir, 'pw'), 'FILE-SECRET-PW\n');
    writeFileSync(join(dir, 'tok'), 'FILE-SECRET-TOKEN\n');
    const secrets = ['INLINE-SECRET-PW', 'FILE-SECRET-PW', 'FILE-SECRET-TOKEN', 'HEADER-SECRET-VALUE', 'QUERY-SECRET-KEY', 'api_key'];
    gw = await startGateway({
      discovery: {
        static: {
          endpoints: [
            endpoint('hosted', 'hosted', `${fakes[0].url}/?api_key=QUERY-SECRET-KEY`, {
              headers: { 'X-Api-Key': 'HEADER-SECRET-VALUE' },
              auth: { type: 'bearer', token_file: join(dir, 'tok') },
            }),
            endpoint('gpu', 'pagedengine', fakes[1].url, { auth: { type: 'basic', username: 'svc', password: 'INLINE-SECRET-PW' } }),
            endpoint('gpu2', 'pagedengine', 'http://127.0.0.1:1/?token=QUERY-SECRET-KEY', {
              auth: { type: 'basic', username: 'svc', password_file: join(dir, 'pw') },
            }),
          ],
        },
      },
    });
    // Traffic of every kind: success, backend error, connection failure.
    await (await request(`${gw.url}/gw/hosted/v1/responses/resp_1?api_key=QUERY-SECRET-KEY`)).body.dump();
    fakes[1].behaviour.status = 500;
    await (await request(`${gw.url}/gw/pagedengine/v1/chat/completions`, { method: 'POST', body: '{}' })).body.dump();
    // The backend did get the credentials it needs.
    const proxied = fakes[0].received.find((r) => r.headers['x-gw-request-id'])!;
    expect(proxied.headers['x-api-key']).toBe('HEADER-SECRET-VALUE');
    expect(proxied.headers.authorization).toBe('Bearer FILE-SECRET-TOKEN');
    expect(proxied.url).toBe('/v1/responses/resp_1?api_key=QUERY-SECRET-KEY&api_key=QUERY-SECRET-KEY');
    const bodies = await Promise.all(
      ['/internal/health', '/internal/status', '/internal/status/endpoints', '/internal/process', '/version'].map(async (p) => (await get(p)).text),
    );
    const everything = [...bodies, ...gw.logs.map((l) => JSON.stringify(l))].join('\n');
    for (const s of secrets) expect(everything).not.toContain(s);
  });
});
