// API keys (the config's auth:): while keys are listed every route but the probes needs one, a
// refusal speaks each API's error shape and names no key, the status routes take an admin key, a
// key sees and uses only its models, its own request limit holds, and the key never reaches a
// backend nor a log.
import { writeFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { stringify } from 'yaml';
import { keyHash } from '../../../engine/core/keys.js';
import { FakeBackend } from '../../../engine/demo/index.js';
import { closeAll, endpoint, startGateway, type Started } from '../../helpers/gateway.js';
import { waitFor } from '../../helpers/wait.js';

const KEYS = {
  ops: 'gw-ops-secret-0001',
  all: 'gw-all-secret-0002',
  scoped: 'gw-scoped-secret-0003',
  off: 'gw-off-secret-0004',
  old: 'gw-old-secret-0005',
  slow: 'gw-slow-secret-0006',
};
const keys = [
  { name: 'ops', hash: keyHash(KEYS.ops) },
  { name: 'all', hash: keyHash(KEYS.all), labels: { team: 'search' } },
  { name: 'scoped', hash: keyHash(KEYS.scoped), models: ['model-a', 'team-*', 'nick'] },
  { name: 'off', hash: keyHash(KEYS.off), enabled: false },
  { name: 'old', hash: keyHash(KEYS.old), expires: '2020-01-31' },
  { name: 'slow', hash: keyHash(KEYS.slow), requests_per_minute: 1 },
];

let paged: FakeBackend, runner: FakeBackend, gw: Started;
beforeAll(async () => {
  paged = await new FakeBackend({ family: 'pagedengine', name: 'paged', models: [{ name: 'model-a' }, { name: 'model-b' }, { name: 'team-x' }] }).start();
  runner = await new FakeBackend({ family: 'localrunner', name: 'runner', models: [{ name: 'model-a' }, { name: 'model-b' }] }).start();
  gw = await startGateway({
    auth: { keys, admin: ['ops'] },
    model_aliases: { nick: ['model-b'] },
    server: {
      rate_limits: {
        global_requests_per_minute: 0,
        per_ip_requests_per_minute: 0,
        health_requests_per_minute: 0,
        internal_requests_per_minute: 0,
        burst_size: 1,
      },
    },
    discovery: {
      static: {
        endpoints: [
          endpoint('paged', 'pagedengine', paged.url, { auth: { type: 'bearer', token: 'backend-token' } }),
          endpoint('runner', 'localrunner', runner.url),
        ],
      },
    },
  });
  await waitFor(() => (gw.gw.runtime.catalogue.all().length >= 3 ? true : undefined), 'both lists discovered');
});
afterAll(() => closeAll(gw, [paged, runner]));

async function call(path: string, init: { key?: string; headers?: Record<string, string>; body?: object; method?: string } = {}) {
  const headers: Record<string, string> = { ...(init.key ? { authorization: `Bearer ${init.key}` } : {}), ...init.headers };
  if (init.body) headers['content-type'] = 'application/json';
  const res = await request(`${gw.url}${path}`, {
    method: (init.method ?? (init.body ? 'POST' : 'GET')) as 'GET',
    headers,
    body: init.body ? JSON.stringify(init.body) : undefined,
  });
  const text = await res.body.text();
  let json: any;
  try {
    json = JSON.parse(text);
  } catch {}
  return { status: res.statusCode, headers: res.headers, json, text };
}
const chat = (model: string) => ({ model, messages: [{ role: 'user', content: 'hi' }] });
const ids = (list: { id: string }[]) => list.map((m) => m.id).sort();

describe('a key is needed while keys are on', () => {
  it('no key or an unknown one: 401 invalid_api_key in the gateway envelope, naming no key', async () => {
    for (const key of [undefined, 'gw-not-a-key']) {
      const r = await call('/gw/pagedengine/v1/chat/completions', { key, body: chat('model-a') });
      expect(r.status).toBe(401);
      expect(r.json.error).toMatchObject({ type: 'invalid_request_error', code: 'invalid_api_key' });
      expect(r.text).not.toContain('ops');
    }
    expect(paged.traffic).toHaveLength(0);
  });

  it("in each API's own shape: the messages API's authentication_error, Ollama's {\"error\": …}", async () => {
    const msg = await call('/gw/msgapi/v1/messages', { body: { ...chat('model-a'), max_tokens: 8 } });
    expect([msg.status, msg.json.type, msg.json.error.type]).toEqual([401, 'error', 'authentication_error']);
    const ollama = await call('/gw/localrunner/api/tags');
    expect(ollama.status).toBe(401);
    expect(typeof ollama.json.error).toBe('string');
  });

  it('a disabled or expired key: 401 with the reason', async () => {
    expect((await call('/gw/models', { key: KEYS.off })).json.error.message).toContain('disabled');
    const old = await call('/gw/models', { key: KEYS.old });
    expect([old.status, old.json.error.message]).toEqual([401, 'the API key expired at 2020-01-31T23:59:59.999Z']);
  });

  it("is read from Authorization: Bearer, x-api-key, or HTTP Basic's password", async () => {
    expect((await call('/gw/models', { key: KEYS.all })).status).toBe(200);
    expect((await call('/gw/models', { headers: { 'x-api-key': KEYS.all } })).status).toBe(200);
    expect((await call('/gw/models', { headers: { authorization: `Basic ${Buffer.from(`anyone:${KEYS.all}`).toString('base64')}` } })).status).toBe(200);
  });

  it('the probes, /version and GET / need none', async () => {
    for (const path of ['/internal/health', '/internal/ready', '/version', '/']) expect((await call(path)).status, path).toBe(200);
  });

  it('the status routes, metrics and dashboard need an admin key; without one a browser is asked for it', async () => {
    const none = await call('/internal/status');
    expect(none.status).toBe(401);
    expect(none.headers['www-authenticate']).toMatch(/^Basic realm=/);
    const plain = await call('/internal/status', { key: KEYS.all });
    expect([plain.status, plain.json.error.code]).toEqual([403, 'admin_key_required']);
    expect((await call('/internal/status', { key: KEYS.ops })).status).toBe(200);
    expect((await call('/internal/metrics', { key: KEYS.ops })).status).toBe(200);
    // An API route asks no browser for a password.
    expect((await call('/gw/models')).headers['www-authenticate']).toBeUndefined();
  });
});

describe('the key never reaches a backend', () => {
  it("the endpoint gets its own credential, not the client's key, whichever header carried it", async () => {
    paged.received.length = 0;
    expect((await call('/gw/pagedengine/v1/chat/completions', { key: KEYS.all, body: chat('model-a') })).status).toBe(200);
    expect((await call('/gw/pagedengine/v1/chat/completions', { headers: { 'x-api-key': KEYS.all }, body: chat('model-a') })).status).toBe(200);
    const sent = paged.traffic.map((r) => r.headers);
    expect(sent).toHaveLength(2);
    for (const h of sent) {
      expect(h.authorization).toBe('Bearer backend-token');
      expect(h['x-api-key']).toBeUndefined();
    }
  });

  it('nor a status page or a metric', async () => {
    const pages = await Promise.all(
      ['/internal/status', '/internal/status/endpoints', '/internal/metrics', '/internal/process'].map((p) => call(p, { key: KEYS.ops })),
    );
    for (const page of pages) {
      expect(page.status).toBe(200);
      for (const k of Object.values(KEYS)) expect(page.text).not.toContain(k);
      for (const k of keys) expect(page.text).not.toContain(k.hash.slice(7));
    }
  });

  it("nor a log: the key's name is there, never the key or its hash", () => {
    const text = JSON.stringify(gw.logs);
    for (const k of Object.values(KEYS)) expect(text).not.toContain(k);
    for (const k of keys) expect(text).not.toContain(k.hash.slice(7));
    expect(gw.logs.some((l) => l.key === 'all' && l.status === 200)).toBe(true);
  });
});

describe('a key sees and uses only its models', () => {
  it('every model list shows only its models and aliases', async () => {
    expect(ids((await call('/gw/openai/v1/models', { key: KEYS.scoped })).json.data)).toEqual(['model-a', 'nick', 'team-x']);
    expect(ids((await call('/gw/openai/v1/models', { key: KEYS.all })).json.data)).toEqual(['model-a', 'model-b', 'nick', 'team-x']);
    expect(ids((await call('/gw/models', { key: KEYS.scoped })).json.models).sort()).toEqual(['model-a', 'model-a', 'nick', 'nick', 'team-x']);
    expect(ids((await call('/gw/msgapi/v1/models', { key: KEYS.scoped })).json.data)).toEqual(['model-a', 'nick', 'team-x']);
    expect(ids((await call('/gw/pagedengine/v1/models', { key: KEYS.scoped })).json.data)).toEqual(['model-a', 'nick', 'team-x']);
    const tags = (await call('/gw/localrunner/api/tags', { key: KEYS.scoped })).json.models.map((m: { name: string }) => m.name).sort();
    expect(tags).toEqual(['model-a', 'nick']);
  });

  it('a model outside them is not found, however it is asked for', async () => {
    expect((await call('/gw/openai/v1/models/model-b', { key: KEYS.scoped })).status).toBe(404);
    expect((await call('/gw/models/model-b', { key: KEYS.scoped })).status).toBe(404);
    expect((await call('/gw/msgapi/v1/models/model-b', { key: KEYS.scoped })).status).toBe(404);
    expect((await call('/gw/openai/v1/models/model-a', { key: KEYS.scoped })).status).toBe(200);
  });

  it('a request for one is refused with 403 model_not_allowed before any backend is asked; its own go through', async () => {
    paged.received.length = 0;
    const r = await call('/gw/pagedengine/v1/chat/completions', { key: KEYS.scoped, body: chat('model-b') });
    expect([r.status, r.json.error.code]).toEqual([403, 'model_not_allowed']);
    const msg = await call('/gw/msgapi/v1/messages', { key: KEYS.scoped, body: { ...chat('model-b'), max_tokens: 8 } });
    expect([msg.status, msg.json.error.type]).toEqual([403, 'permission_error']);
    expect(paged.traffic).toHaveLength(0);
    for (const model of ['model-a', 'team-x', 'nick'])
      expect((await call('/gw/openai/v1/chat/completions', { key: KEYS.scoped, body: chat(model) })).status, model).toBe(200);
  });
});

describe('model management', () => {
  it('pulling or deleting models on an engine takes an admin key', async () => {
    runner.received.length = 0;
    const plain = await call('/gw/localrunner/api/pull', { key: KEYS.all, body: { model: 'model-a' } });
    expect([plain.status, plain.json.error]).toEqual([403, 'this route needs an admin key (auth.admin)']);
    expect(runner.traffic).toHaveLength(0);
    expect((await call('/gw/localrunner/api/pull', { key: KEYS.ops, body: { model: 'model-a', stream: false } })).status).toBe(200);
  });
});

describe("a key's own request limit", () => {
  it('429 KEY_RATE_LIMITED with Retry-After past it; other keys go on', async () => {
    expect((await call('/gw/models', { key: KEYS.slow })).status).toBe(200);
    const r = await call('/gw/models', { key: KEYS.slow });
    expect([r.status, r.json.error.code]).toEqual([429, 'KEY_RATE_LIMITED']);
    expect(Number(r.headers['retry-after'])).toBeGreaterThan(0);
    expect((await call('/gw/models', { key: KEYS.all })).status).toBe(200);
  });
});

describe('the keys file', () => {
  it('is read at load and on change; a mistake in it keeps the keys in force', async () => {
    const file = `${gw.configFile}.keys.yaml`;
    const late = 'gw-late-secret-0007';
    writeFileSync(file, stringify([{ name: 'late', hash: keyHash(late) }]));
    const config = { auth: { keys, keys_file: file, admin: ['ops'] } };
    const { parse } = await import('yaml');
    const { readFileSync } = await import('node:fs');
    const base = parse(readFileSync(gw.configFile, 'utf8'));
    writeFileSync(gw.configFile, stringify({ ...base, ...config }));
    expect(await gw.gw.reload('test')).toBe(true);
    expect((await call('/gw/models', { key: late })).status).toBe(200);
    writeFileSync(file, stringify([{ name: 'late', hash: 'sha256:not-hex' }]));
    expect(await gw.gw.reload('test')).toBe(false);
    expect(gw.gw.runtime.reload.error).toContain('auth.keys_file');
    expect(gw.gw.runtime.reload.error).not.toContain('not-hex');
    expect((await call('/gw/models', { key: late })).status).toBe(200);
  });
});
