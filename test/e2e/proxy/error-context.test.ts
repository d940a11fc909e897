// Backend error replies of the families whose profile declares api.error_context: the hosted
// family's gain gw_context {endpoint, request_id, timestamp}; the multi-provider gateway's carry
// an integer code and the provider. Everything else passes through byte for byte.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { FakeBackend } from '../../../engine/demo/index.js';
import { REWRITE_LIMIT } from '../../../plugins/replies/rewrite-body.js';
import { closeAll, endpoint, startGateway, type Started } from '../../helpers/gateway.js';

let hosted: FakeBackend, multi: FakeBackend, paged: FakeBackend, gw: Started;

beforeAll(async () => {
  hosted = await new FakeBackend({ family: 'hosted-compatible', name: 'hosted', models: [{ name: 'gpt-4o-mini' }] }).start();
  multi = await new FakeBackend({ family: 'multigateway', name: 'multi', models: [{ name: 'anthropic/claude-x' }, { name: 'gpt-4o-mini' }] }).start();
  paged = await new FakeBackend({ family: 'pagedengine', name: 'paged', models: [{ name: 'qwen' }] }).start();
  // One attempt per request, and breakers that never open: the tests look at error bodies, one
  // gateway serves them all.
  gw = await startGateway({
    proxy: { retry: { on_statuses: [] }, circuit_breaker: { proxy_failures: 1000 } },
    discovery: {
      static: {
        endpoints: [endpoint('hosted', 'hosted', hosted.url), endpoint('multi', 'multigateway', multi.url), endpoint('paged', 'pagedengine', paged.url)],
      },
    },
  });
});
afterAll(() => closeAll(gw, [hosted, multi, paged]));
beforeEach(() => [hosted, multi, paged].forEach((f) => f.reset()));

const post = async (family: string, model: string, extra: Record<string, unknown> = {}) => {
  const res = await request(`${gw.url}/gw/${family}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-request-id': 'trace-42' },
    body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }], ...extra }),
  });
  const text = await res.body.text();
  return { status: res.statusCode, headers: res.headers, text };
};

describe('hosted errors', () => {
  it('gain gw_context (endpoint, request id, timestamp); the backend body is kept', async () => {
    hosted.behaviour.status = 429;
    hosted.behaviour.errorBody = {
      contentType: 'application/json',
      body: '{"error":{"message":"Rate limit reached","type":"requests","param":null,"code":"rate_limit_exceeded"}}',
    };
    const before = Date.now();
    const { status, headers, text } = await post('hosted', 'gpt-4o-mini');
    expect(status).toBe(429);
    expect(headers['content-length']).toBe(String(Buffer.byteLength(text)));
    expect(headers['x-gw-endpoint']).toBe('hosted');
    const body = JSON.parse(text);
    expect(body.error).toEqual({ message: 'Rate limit reached', type: 'requests', param: null, code: 'rate_limit_exceeded' });
    expect(body.gw_context).toEqual({ endpoint: 'hosted', request_id: 'trace-42', timestamp: expect.any(String) });
    expect(Date.parse(body.gw_context.timestamp)).toBeGreaterThanOrEqual(before - 1000);
  });

  it('pass a body that is not a JSON object through unchanged', async () => {
    hosted.behaviour.status = 502;
    hosted.behaviour.errorBody = { contentType: 'text/html', body: '<html>bad gateway</html>' };
    expect(await post('hosted', 'gpt-4o-mini')).toMatchObject({ status: 502, text: '<html>bad gateway</html>' });
    hosted.behaviour.errorBody = { contentType: 'application/json', body: '["not", "an object"]' };
    expect((await post('hosted', 'gpt-4o-mini')).text).toBe('["not", "an object"]');
    hosted.behaviour.errorBody = { contentType: 'application/json', body: '{"error": truncated' };
    expect((await post('hosted', 'gpt-4o-mini')).text).toBe('{"error": truncated');
  });

  it('relay an error body larger than the bound as it came, whole', async () => {
    const big = JSON.stringify({ error: { message: 'x'.repeat(REWRITE_LIMIT * 2) } });
    hosted.behaviour.status = 400;
    hosted.behaviour.errorBody = { contentType: 'application/json', body: big };
    const { status, text } = await post('hosted', 'gpt-4o-mini');
    expect(status).toBe(400);
    expect(text).toBe(big);
  });

  it('relay a JSON error body nested too deep to serialise again as it came, without an error log', async () => {
    const deep = `{"error":${'['.repeat(20_000)}${']'.repeat(20_000)}}`;
    hosted.behaviour.status = 400;
    hosted.behaviour.errorBody = { contentType: 'application/json', body: deep };
    const errorsBefore = gw.logs.filter((l) => l.level >= 50).length;
    expect(await post('hosted', 'gpt-4o-mini')).toMatchObject({ status: 400, text: deep });
    expect(gw.logs.filter((l) => l.level >= 50).length).toBe(errorsBefore);
  });

  it('leave success replies untouched', async () => {
    const { status, text } = await post('hosted', 'gpt-4o-mini');
    expect(status).toBe(200);
    expect(JSON.parse(text)).not.toHaveProperty('gw_context');
  });
});

describe('multigateway errors', () => {
  it('carry an integer code and the provider (from a provider/ model name)', async () => {
    multi.behaviour.status = 429;
    // LiteLLM writes the code as a string.
    multi.behaviour.errorBody = {
      contentType: 'application/json',
      body: '{"error":{"message":"litellm.RateLimitError","type":"None","param":"None","code":"429"}}',
    };
    const { status, text } = await post('multigateway', 'anthropic/claude-x');
    expect(status).toBe(429);
    expect(JSON.parse(text)).toEqual({ error: { message: 'litellm.RateLimitError', type: 'None', param: 'None', code: 429, provider: 'anthropic' } });
  });

  it('name the provider the model list gives (owned_by), and the status when the code is not a number', async () => {
    multi.behaviour.status = 400;
    multi.behaviour.errorBody = { contentType: 'application/json', body: '{"error":{"message":"bad","code":"invalid_request"}}' };
    expect(JSON.parse((await post('multigateway', 'gpt-4o-mini')).text)).toEqual({ error: { message: 'bad', code: 400, provider: 'openai' } });
  });
});

describe('families that declare nothing', () => {
  it('get the backend error body byte for byte', async () => {
    paged.behaviour.status = 400;
    paged.behaviour.errorBody = { contentType: 'application/json', body: '{"object":"error","message":"bad","code":"400"}' };
    expect(await post('pagedengine', 'qwen')).toMatchObject({ status: 400, text: '{"object":"error","message":"bad","code":"400"}' });
  });
});
