// The public plugin API as a plugin author uses it: a package in a folder of its own imports
// `inference-gateway`, refuses requests through the one error renderer, and one config line puts
// it on every route; a terminal step that writes its own head still gets CORS and X-Gw-*.
import { cpSync, mkdirSync, mkdtempSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { FakeBackend } from '../../../engine/demo/index.js';
import { closeAll, endpoint, startGateway, type Started } from '../../helpers/gateway.js';

let fake: FakeBackend, gw: Started;
beforeAll(async () => {
  // As a user has it: the plugin's own folder, and the gateway installed beside it.
  const root = mkdtempSync(join(tmpdir(), 'gw-plugin-user-'));
  mkdirSync(join(root, 'node_modules'));
  symlinkSync(resolve('.'), join(root, 'node_modules', 'inference-gateway'), 'dir');
  cpSync(resolve('test/fixtures/packages/gw-api-key'), join(root, 'plugins', 'gw-api-key'), { recursive: true });
  const pipelines = join(root, 'pipelines');
  mkdirSync(pipelines);
  writeFileSync(join(pipelines, 'hello.yaml'), 'name: hello\nmount: { paths: [/hello] }\nsteps:\n  - use: hello-terminal\n');
  process.env.GW_API_KEYS = 'k-alpha, k-beta';
  fake = await new FakeBackend({ family: 'pagedengine', name: 'paged' }).start();
  gw = await startGateway({
    plugins: [join(root, 'plugins', 'gw-api-key'), resolve('test/fixtures/plugins/hello-terminal.mjs')],
    pipelines: { dir: pipelines, before: ['api-key'] },
    discovery: { static: { endpoints: [endpoint('paged', 'pagedengine', fake.url)] } },
  });
});
afterAll(() => closeAll(gw, [fake]));

async function call(path: string, init: { method?: string; headers?: Record<string, string>; body?: string } = {}) {
  const res = await request(`${gw.url}${path}`, { method: (init.method ?? 'GET') as 'GET', headers: init.headers, body: init.body });
  const text = await res.body.text();
  return {
    status: res.statusCode,
    headers: res.headers,
    json: String(res.headers['content-type']).startsWith('application/json') ? JSON.parse(text) : undefined,
    text,
  };
}

describe('an API-key plugin from its own package, on every route by one config line', () => {
  it.each([
    ['GET', '/gw/pagedengine/v1/models'],
    ['POST', '/gw/pagedengine/v1/chat/completions'],
    ['POST', '/gw/proxy/v1/chat/completions'],
    ['GET', '/gw/models'],
    ['GET', '/gw/models/test-model'],
    ['GET', '/internal/status'],
    ['GET', '/hello'],
  ])('refuses %s %s without a key: 401 in the envelope, with the gateway headers', async (method, path) => {
    const r = await call(path, { method, body: method === 'POST' ? '{"model":"test-model","messages":[]}' : undefined });
    expect(r.status).toBe(401);
    expect(r.json.error).toEqual({ message: 'send your API key in the x-api-key header', type: 'unauthorized', code: 'API_KEY_REQUIRED' });
    // X-Gw-* on every route but the status routes (pipelines/shared.yaml).
    if (!path.startsWith('/internal/')) expect(r.headers['x-gw-request-id']).toBeDefined();
    expect(fake.traffic).toHaveLength(0);
  });

  it('answers in the messages API form on its routes', async () => {
    const r = await call('/gw/msgapi/v1/messages', { method: 'POST', body: '{"model":"test-model","max_tokens":8,"messages":[]}' });
    expect(r.status).toBe(401);
    expect(r.json).toMatchObject({ type: 'error', error: { code: 'API_KEY_REQUIRED' } });
  });

  it('refuses a wrong key with 403 and lets a right one through, in the header or as a bearer token', async () => {
    expect((await call('/gw/pagedengine/v1/models', { headers: { 'x-api-key': 'nope' } })).status).toBe(403);
    expect((await call('/gw/pagedengine/v1/models', { headers: { 'x-api-key': 'k-alpha' } })).status).toBe(200);
    expect((await call('/gw/pagedengine/v1/models', { headers: { authorization: 'Bearer k-beta' } })).status).toBe(200);
    expect((await call('/gw/models', { headers: { 'x-api-key': 'k-beta' } })).status).toBe(200);
  });

  it('leaves the health probe and CORS preflights open', async () => {
    expect((await call('/internal/health')).status).toBe(200);
    const pre = await call('/gw/pagedengine/v1/chat/completions', { method: 'OPTIONS' });
    expect(pre.status).toBe(204);
    expect(pre.headers['access-control-allow-origin']).toBe('*');
  });
});

describe('a terminal step that never thinks about headers', () => {
  it('still gets CORS and X-Gw-* on its reply', async () => {
    const r = await call('/hello', { headers: { 'x-api-key': 'k-alpha' } });
    expect(r.status).toBe(200);
    expect(r.text).toBe('hello');
    expect(r.headers['content-type']).toBe('text/plain');
    expect(r.headers['access-control-allow-origin']).toBe('*');
    expect(r.headers['x-gw-request-id']).toMatch(/^req-/);
    expect(r.headers['x-gw-response-time']).toMatch(/ms$/);
  });
});
