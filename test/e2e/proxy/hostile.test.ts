// Malformed and hostile requests: a clear error with the right status, nothing unsafe reaches a
// backend, and the gateway keeps serving everyone else.
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { FakeBackend } from '../../../engine/demo/index.js';
import { closeAll, endpoint, startGateway, type Started } from '../../helpers/gateway.js';
import { rawRequest } from '../../helpers/http.js';

const UNICODE = 'модель-😀';
let paged: FakeBackend, npu: FakeBackend, gw: Started;
beforeAll(async () => {
  paged = await new FakeBackend({ family: 'pagedengine', name: 'paged', models: [{ name: 'test-model' }, { name: UNICODE }] }).start();
  npu = await new FakeBackend({ family: 'npuengine', name: 'npu' }).start();
  gw = await startGateway({
    model_aliases: { constructor: ['test-model'], toString: ['test-model'] },
    translators: { msgapi: { max_message_size: 1024 } },
    discovery: { static: { endpoints: [endpoint('paged', 'pagedengine', paged.url), endpoint('npu', 'npuengine', npu.url)] } },
  });
});
afterAll(() => closeAll(gw, [paged, npu]));

const chat = (model: string) => JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }] });
const post = (path: string, body: string, headers: Record<string, string> = {}) =>
  rawRequest(`${gw.url}${path}`, { method: 'POST', body, headers: { 'content-type': 'application/json', ...headers } });
const envelope = (body: string) => JSON.parse(body).error as { message: string; type: string; code: unknown };

async function stillServing() {
  const res = await request(`${gw.url}/internal/health`);
  await res.body.dump();
  expect(res.statusCode).toBe(200);
}

describe('model names that once ended the process', () => {
  it('CR and LF in the model: an error envelope, the header encoded, nothing injected', async () => {
    const r = await post('/gw/pagedengine/v1/chat/completions', chat('m\r\nX-Injected: yes'));
    expect(r.status).toBe(404);
    expect(envelope(r.body).code).toBe('MODEL_NOT_FOUND');
    expect(r.headers['x-gw-model']).toBe('m%0D%0AX-Injected: yes');
    expect(r.headers['x-injected']).toBeUndefined();
    await stillServing();
  });

  it('a model outside Latin-1 is percent-encoded in X-Gw-Model, on errors and on backend replies', async () => {
    const missing = await post('/gw/pagedengine/v1/chat/completions', chat(`${UNICODE}-missing`));
    expect(missing.status).toBe(404);
    expect(decodeURIComponent(String(missing.headers['x-gw-model']))).toBe(`${UNICODE}-missing`);
    const served = await post('/gw/pagedengine/v1/chat/completions', chat(UNICODE));
    expect(served.status).toBe(200);
    expect(served.headers['x-fake-backend']).toBe('paged');
    expect(decodeURIComponent(String(served.headers['x-gw-model']))).toBe(UNICODE);
    expect(paged.traffic.at(-1)!.json.model).toBe(UNICODE);
  });

  it('NUL in the model', async () => {
    const r = await post('/gw/pagedengine/v1/chat/completions', chat('a\u0000b'));
    expect(r.status).toBe(404);
    expect(r.headers['x-gw-model']).toBe('a%00b');
  });

  it('a 100 KB model name: a reply any client can read, its echoes cut to 256 characters', async () => {
    const r = await post('/gw/pagedengine/v1/chat/completions', chat('x'.repeat(100_000)));
    expect(r.status).toBe(404);
    expect(String(r.headers['x-gw-model'])).toHaveLength(256);
    expect(envelope(r.body).message.length).toBeLessThan(1000);
    expect(gw.logs.every((l) => JSON.stringify(l).length < 5_000)).toBe(true);
  });

  it('a 200 KB X-Request-ID is not echoed: the gateway makes up its own id', async () => {
    const r = await rawRequest(`${gw.url}/gw/models`, { headers: { 'x-request-id': 'r'.repeat(200_000) } });
    expect(r.status).toBe(200);
    expect(r.headers['x-gw-request-id']).toMatch(/^req-[0-9a-f-]{36}$/);
    // Proxied, it travels on as the client's own header; what the backend makes of it comes back.
    const proxied = await rawRequest(`${gw.url}/gw/pagedengine/v1/models`, { headers: { 'x-request-id': 'r'.repeat(200_000) } });
    expect(proxied.headers['x-gw-request-id']).toMatch(/^req-[0-9a-f-]{36}$/);
    const mine = await rawRequest(`${gw.url}/gw/pagedengine/v1/models`, { headers: { 'x-request-id': 'trace-42' } });
    expect(mine.headers['x-gw-request-id']).toBe('trace-42');
  });
});

describe('prototype keys in request data', () => {
  const NAMES = ['__proto__', 'constructor', 'toString', 'valueOf', 'hasOwnProperty'];

  it.each(NAMES)('%s as a model id on /gw/models/{id}: a plain 404, or the alias of that name', async (name) => {
    const r = await rawRequest(`${gw.url}/gw/models/${name}`);
    if (name === 'constructor' || name === 'toString') {
      expect(r.status).toBe(200);
      expect(JSON.parse(r.body)).toMatchObject({ id: name, metadata: { alias_of: ['test-model'] } });
    } else {
      expect(r.status).toBe(404);
      expect(envelope(r.body).code).toBe('MODEL_NOT_FOUND');
    }
  });

  it.each(NAMES)('%s as the model of a chat request: a plain 404, or the alias routed and rewritten', async (name) => {
    const r = await post('/gw/pagedengine/v1/chat/completions', chat(name));
    if (name === 'constructor' || name === 'toString') {
      expect(r.status).toBe(200);
      expect(paged.traffic.at(-1)!.json.model).toBe('test-model');
    } else {
      expect(r.status).toBe(404);
      expect(envelope(r.body).code).toBe('MODEL_NOT_FOUND');
    }
  });

  it.each(NAMES)('%s as a path segment and a query value', async (name) => {
    expect((await rawRequest(`${gw.url}/gw/pagedengine/${name}`)).status).toBe(404);
    for (const [q, code] of [
      ['format', 'INVALID_FORMAT'],
      ['provider', 'INVALID_PROVIDER'],
      ['capability', 'INVALID_CAPABILITY'],
    ]) {
      const r = await rawRequest(`${gw.url}/gw/models?${q}=${name}`);
      expect(r.status).toBe(400);
      expect(envelope(r.body).code).toBe(code);
    }
    const msg = await post(
      '/gw/msgapi/v1/messages',
      JSON.stringify({ model: 'test-model', max_tokens: 8, messages: [{ role: 'user', content: 'hi' }], tools: [{ name: 't' }], tool_choice: { type: name } }),
    );
    expect(msg.status).toBe(200);
  });
});

describe('paths that climb out', () => {
  const CLIMBING = [
    '/gw/proxy/../../etc/passwd',
    '/gw/proxy/%2e%2e/%2e%2e/etc/passwd',
    '/gw/proxy/v1/..%2f..%2fetc/passwd',
    '/gw/pagedengine/v1/../../etc/passwd',
    '/gw/pagedengine/./v1/models',
    '/gw/npuengine/api/v1/%2E%2E/%2E%2E/etc/passwd',
    '/gw/npuengine/api/v1/..;/admin',
    '/gw/npuengine/api%2fv1/health',
    '/gw/npuengine/api%5Cv1/health',
    '/gw/models/..%2f..%2fetc',
    '/gw/pagedengine/v1/models/org%2F..%2Fadmin',
    '/gw/npuengine/api%2fv1/models/x',
    '/internal/../gw/proxy/x',
  ];

  it.each(CLIMBING)('%s is refused with 400 before any backend', async (path) => {
    // Proxied traffic only: health checks and discovery may arrive meanwhile.
    const before = paged.traffic.length + npu.traffic.length;
    const r = await rawRequest(`${gw.url}${path}`);
    expect(r.status).toBe(400);
    expect(envelope(r.body).code).toBe('UNSAFE_PATH');
    expect(paged.traffic.length + npu.traffic.length).toBe(before);
  });

  it('dots inside names are fine: a model id with a dot and a slash, a file-like path', async () => {
    const r = await rawRequest(`${gw.url}/gw/models/test-model`);
    expect(r.status).toBe(200);
    const dotted = await rawRequest(`${gw.url}/gw/models/org/llama-3.1-8b`);
    expect(dotted.status).toBe(404);
    expect(envelope(dotted.body).message).toContain('org/llama-3.1-8b');
    const forwarded = await rawRequest(`${gw.url}/gw/npuengine/api/v1/files/a..b.txt`);
    expect(forwarded.status).toBe(200);
    // The proxied requests only: a health check may land after it on a busy machine.
    expect(npu.traffic.at(-1)!.url).toBe('/api/v1/files/a..b.txt');
  });
});

/** Send a head with Expect: 100-continue; resolve with what came back before we send any body. */
function expectContinue(path: string, length: number): Promise<{ first: string; socket: ReturnType<typeof connect> }> {
  return new Promise((resolve, reject) => {
    const socket = connect(gw.gw.port, '127.0.0.1');
    socket.once('data', (d) => resolve({ first: d.toString('latin1'), socket }));
    socket.on('error', reject);
    socket.write(`POST ${path} HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\nContent-Length: ${length}\r\nExpect: 100-continue\r\n\r\n`);
  });
}

describe('Expect: 100-continue', () => {
  it('an oversize declared body gets 413 at once, never 100 Continue', async () => {
    const { first, socket } = await expectContinue('/gw/msgapi/v1/messages', 2048);
    socket.destroy();
    expect(first).toMatch(/^HTTP\/1\.1 413 /);
    expect(first).not.toContain('100 Continue');
    expect(first).toContain('BODY_TOO_LARGE');
  });

  it('a body that fits is invited, sent and forwarded (without the Expect header)', async () => {
    const body = chat('test-model');
    const { first, socket } = await expectContinue('/gw/pagedengine/v1/chat/completions', Buffer.byteLength(body));
    expect(first).toMatch(/^HTTP\/1\.1 100 Continue\r\n/);
    const reply = await new Promise<string>((resolve) => {
      let text = '';
      socket.on('data', (d) => {
        text += d;
        if (text.includes('"object":"chat.completion"')) resolve(text);
      });
      socket.write(body);
    });
    socket.destroy();
    expect(reply).toMatch(/^HTTP\/1\.1 200 /);
    expect(paged.traffic.at(-1)!.headers.expect).toBeUndefined();
  });
});
