// Headers both ways, CORS, the error envelope, and backend replies passed through unchanged.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { FakeBackend } from '../../../engine/demo/index.js';
import { endpoint, startGateway, type Started } from '../../helpers/gateway.js';
import { rawRequest } from '../../helpers/http.js';

const secrets = mkdtempSync(join(tmpdir(), 'gw-secrets-'));
writeFileSync(join(secrets, 'pw'), 's3cret-from-file\n');
writeFileSync(join(secrets, 'token'), 'tok-from-file\n');

let local: FakeBackend, desk: FakeBackend, paged: FakeBackend, hostedA: FakeBackend, hostedB: FakeBackend, based: FakeBackend;
let gw: Started;

beforeAll(async () => {
  local = await new FakeBackend({ family: 'localrunner', models: [{ name: 'llama3.1:8b' }] }).start();
  desk = await new FakeBackend({ family: 'deskrunner' }).start();
  paged = await new FakeBackend({ family: 'pagedengine' }).start();
  hostedA = await new FakeBackend({ family: 'hosted-compatible', name: 'hosted-a' }).start();
  hostedB = await new FakeBackend({ family: 'mlxsingle', name: 'mlx-bearer' }).start();
  based = await new FakeBackend({ family: 'cppengine', name: 'based' }).start();
  gw = await startGateway({
    discovery: {
      static: {
        endpoints: [
          endpoint('local', 'localrunner', local.url, { headers: { 'X-Team': 'research' } }),
          endpoint('desk', 'deskrunner', desk.url),
          endpoint('paged', 'pagedengine', paged.url, { auth: { type: 'basic', username: 'svc', password_file: join(secrets, 'pw') } }),
          endpoint('hosted', 'hosted', hostedA.url),
          endpoint('mlx', 'mlxsingle', hostedB.url, { auth: { type: 'bearer', token_file: join(secrets, 'token') } }),
          // A base path on the endpoint URL is kept in front of the forwarded path.
          endpoint('cpp', 'cppengine', `${based.url}/base/v2`, { health_check_url: `${based.url}/health` }),
        ],
      },
    },
  });
});

afterAll(async () => {
  await gw.close();
  for (const f of [local, desk, paged, hostedA, hostedB, based]) await f.stop();
});

beforeEach(() => {
  for (const f of [local, desk, paged, hostedA, hostedB, based]) f.reset();
});

const chat = { model: 'llama3.1:8b', messages: [{ role: 'user', content: 'hi' }] };

describe('response headers', () => {
  it('carries the gateway headers on a proxied reply', async () => {
    const res = await request(`${gw.url}/gw/localrunner/v1/chat/completions`, {
      method: 'POST',
      body: JSON.stringify(chat),
      headers: { 'content-type': 'application/json' },
    });
    await res.body.json();
    expect(res.statusCode).toBe(200);
    expect(res.headers['x-gw-request-id']).toMatch(/^req-[0-9a-f-]{36}$/);
    expect(res.headers['x-gw-endpoint']).toBe('local');
    expect(res.headers['x-gw-model']).toBe('llama3.1:8b');
    expect(res.headers['x-gw-backend-type']).toBe('localrunner');
    expect(res.headers['x-gw-response-time']).toMatch(/^\d+(\.\d+)?(ms|s)$/);
    expect(res.headers['x-fake-backend']).toBe('fake-localrunner');
    expect(res.headers['access-control-allow-origin']).toBe('*');
    expect(res.headers['access-control-allow-methods']).toBe('GET, POST, OPTIONS');
    expect(res.headers['access-control-allow-headers']).toBe('Content-Type, Authorization');
  });

  it('honours a caller X-Request-ID and sends the same id to the backend', async () => {
    const res = await request(`${gw.url}/gw/localrunner/api/version`, { headers: { 'x-request-id': 'trace-abc.123' } });
    await res.body.dump();
    expect(res.headers['x-gw-request-id']).toBe('trace-abc.123');
    expect(local.traffic[0].headers['x-gw-request-id']).toBe('trace-abc.123');
  });

  it('replaces an unsafe caller id with a generated one', async () => {
    const res = await request(`${gw.url}/gw/localrunner/api/version`, { headers: { 'x-request-id': 'bad id with spaces' } });
    await res.body.dump();
    expect(res.headers['x-gw-request-id']).toMatch(/^req-/);
  });

  it('has no X-Gw-Model when the body names no model', async () => {
    const res = await request(`${gw.url}/gw/localrunner/api/version`);
    await res.body.dump();
    expect(res.headers['x-gw-model']).toBeUndefined();
  });

  it('passes backend errors through unchanged, status and body', async () => {
    local.behaviour.status = 500;
    const res = await request(`${gw.url}/gw/localrunner/v1/chat/completions`, { method: 'POST', body: JSON.stringify(chat) });
    const body = (await res.body.json()) as any;
    expect(res.statusCode).toBe(500);
    expect(body.error.message).toBe('fake fake-localrunner failing with 500');
    expect(res.headers['x-gw-endpoint']).toBe('local');
  });

  it('answers an OPTIONS preflight itself', async () => {
    const res = await request(`${gw.url}/gw/localrunner/v1/chat/completions`, {
      method: 'OPTIONS',
      headers: { origin: 'http://app.example', 'access-control-request-method': 'POST' },
    });
    await res.body.dump();
    expect(res.statusCode).toBe(204);
    expect(res.headers['access-control-allow-origin']).toBe('*');
    expect(res.headers['access-control-allow-methods']).toBe('GET, POST, OPTIONS');
    expect(local.traffic).toHaveLength(0);
  });
});

describe('request headers toward the backend', () => {
  it('adds forwarding headers, keeps Authorization, drops hop-by-hop headers and the client Host', async () => {
    const res = await rawRequest(`${gw.url}/gw/localrunner/v1/chat/completions`, {
      method: 'POST',
      body: JSON.stringify(chat),
      headers: {
        authorization: 'Bearer client-key',
        'x-forwarded-for': '10.1.2.3',
        connection: 'keep-alive, x-hop',
        'keep-alive': 'timeout=5',
        'x-hop': 'drop me',
        te: 'trailers',
        'x-custom': 'kept',
        host: 'gateway.example:8443',
        'content-type': 'application/json',
      },
    });
    expect(res.status).toBe(200);
    const h = local.traffic[0].headers;
    expect(h.authorization).toBe('Bearer client-key');
    expect(h['x-forwarded-for']).toBe('10.1.2.3, 127.0.0.1');
    expect(h['x-forwarded-host']).toBe('gateway.example:8443');
    expect(h['x-forwarded-proto']).toBe('http');
    expect(h['x-gw-request-id']).toBe(res.headers['x-gw-request-id']);
    expect(h['x-team']).toBe('research');
    expect(h['x-custom']).toBe('kept');
    expect(h['keep-alive']).toBeUndefined();
    expect(h.te).toBeUndefined();
    expect(h['x-hop']).toBeUndefined();
    expect(h.host).toBe(`127.0.0.1:${local.port}`);
    expect(h['content-type']).toBe('application/json');
    expect(local.traffic[0].text).toBe(JSON.stringify(chat));
  });

  it('sends X-Forwarded-Host and -Proto to deskrunner too, but not to other families', async () => {
    await (await request(`${gw.url}/gw/desk-runner/api/v1/models/download/status`)).body.dump();
    await (await request(`${gw.url}/gw/pagedengine/metrics`)).body.dump();
    expect(desk.traffic.at(-1)!.headers['x-forwarded-host']).toBeDefined();
    expect(paged.traffic.at(-1)!.headers['x-forwarded-host']).toBeUndefined();
    expect(paged.traffic.at(-1)!.headers['x-forwarded-proto']).toBeUndefined();
    expect(paged.traffic.at(-1)!.headers['x-forwarded-for']).toBe('127.0.0.1');
  });

  it('sends basic auth from a password file, replacing the client Authorization', async () => {
    await (await request(`${gw.url}/gw/pagedengine/metrics`, { headers: { authorization: 'Bearer client' } })).body.dump();
    expect(paged.traffic.at(-1)!.headers.authorization).toBe(`Basic ${Buffer.from('svc:s3cret-from-file').toString('base64')}`);
  });

  it('sends bearer auth from a token file', async () => {
    await (await request(`${gw.url}/gw/mlxsingle/health`)).body.dump();
    expect(hostedB.traffic.at(-1)!.headers.authorization).toBe('Bearer tok-from-file');
  });

  it('forwards the caller Authorization to the hosted family', async () => {
    await (await request(`${gw.url}/gw/hosted/v1/responses/resp_1`, { headers: { authorization: 'Bearer sk-user' } })).body.dump();
    expect(hostedA.traffic.at(-1)!.headers.authorization).toBe('Bearer sk-user');
  });

  it('keeps the endpoint base path in front of the forwarded path', async () => {
    await (await request(`${gw.url}/gw/cppengine/props?x=1`)).body.dump();
    expect(based.traffic.at(-1)!.url).toBe('/base/v2/props?x=1');
  });

  it('adds Content-Type: application/json to a POST that has none', async () => {
    await (await request(`${gw.url}/gw/localrunner/api/show`, { method: 'POST', body: '{"name":"llama3.1:8b"}' })).body.dump();
    expect(local.traffic.at(-1)!.headers['content-type']).toBe('application/json');
  });
});

describe('errors', () => {
  it('answers 413 for a body over the limit before contacting a backend', async () => {
    const small = await startGateway({
      server: { request_limits: { max_body_size: 1024 } },
      discovery: { static: { endpoints: [endpoint('local', 'localrunner', local.url)] } },
    });
    try {
      const res = await request(`${small.url}/gw/localrunner/api/chat`, { method: 'POST', body: 'x'.repeat(4096) });
      const body = (await res.body.json()) as any;
      expect(res.statusCode).toBe(413);
      expect(body).toEqual({ error: 'request body is larger than the 1024-byte limit' }); // the native route's shape
      expect(local.traffic).toHaveLength(0);
    } finally {
      await small.close();
    }
  });

  it('gives 404 in the envelope for an unknown route', async () => {
    const res = await request(`${gw.url}/gw/nosuchfamily/v1/models`);
    const body = (await res.body.json()) as any;
    expect(res.statusCode).toBe(404);
    expect(body.error).toMatchObject({ type: 'not_found', code: 'ROUTE_NOT_FOUND' });
  });

  it('gives 503 endpoint_unavailable naming the provider when no endpoint of the family is routable', async () => {
    const res = await request(`${gw.url}/gw/radixengine/v1/models`);
    const body = (await res.body.json()) as any;
    expect(res.statusCode).toBe(503);
    expect(body.error.type).toBe('endpoint_unavailable');
    expect(body.error.code).toBe(503);
    expect(body.error.message).toContain('radixengine');
    expect(res.headers['x-gw-request-id']).toMatch(/^req-/);
    expect(res.headers['access-control-allow-origin']).toBe('*');
  });
});
