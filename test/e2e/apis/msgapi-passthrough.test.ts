// Passthrough to a backend that speaks the messages API: what the gateway lets through (JSON
// and a model are all it checks), what it leaves out (the billing block, toward local backends
// only, switchable), and how a backend's error reaches the client (in the messages API's shape).
import Anthropic from '@anthropic-ai/sdk';
import { request } from 'undici';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { FakeBackend } from '../../../engine/demo/index.js';
import { closeAll, endpoint, startGateway, type Started } from '../../helpers/gateway.js';
import { customProfiles } from '../../helpers/profiles.js';

const BILLING = { type: 'text', text: 'x-anthropic-billing-header: cc_version=2.1.154.e3f; cc_entrypoint=cli; cch=7c1e2;' };

let native: FakeBackend, hosted: FakeBackend, gw: Started;
beforeAll(async () => {
  native = await new FakeBackend({ family: 'localrunner', name: 'native', reply: 'Native hello', models: [{ name: 'llama-native' }] }).start();
  hosted = await new FakeBackend({ family: 'hosted-compatible', name: 'hosted', models: [{ name: 'gpt-hosted' }] }).start();
  gw = await startGateway({ discovery: { static: { endpoints: [endpoint('native', 'localrunner', native.url), endpoint('hosted', 'hosted', hosted.url)] } } });
});
afterAll(() => closeAll(gw, [native, hosted]));
beforeEach(() => {
  native.reset();
  hosted.reset();
});

const post = (base: string, body: string) =>
  request(`${base}/gw/msgapi/v1/messages`, { method: 'POST', body, headers: { 'content-type': 'application/json' } });
const client = () => new Anthropic({ baseURL: `${gw.url}/gw/msgapi`, apiKey: 'sk-ant-test', maxRetries: 0 });

describe('what passthrough lets through', () => {
  it('forwards roles, block types and fields the gateway does not know, byte for byte', async () => {
    const body = JSON.stringify({
      model: 'llama-native',
      max_tokens: 16,
      context_management: { edits: [] },
      messages: [
        { role: 'user', content: 'hi' },
        { role: 'system', content: 'mid-conversation' },
        { role: 'user', content: [{ type: 'future_block', x: 1 }] },
      ],
    });
    const res = await post(gw.url, body);
    expect(res.statusCode).toBe(200);
    expect(res.headers['x-gw-mode']).toBe('passthrough');
    await res.body.dump();
    expect(native.traffic[0].text).toBe(body);
  });

  it('lets the backend judge a request the translator could not take', async () => {
    const body = '{"model":"llama-native","messages":"not a list"}';
    const res = await post(gw.url, body);
    await res.body.dump();
    expect(res.statusCode).toBe(200);
    expect(native.traffic[0].text).toBe(body);
  });

  it('still needs JSON with a model to route', async () => {
    for (const [body, message] of [
      ['[1]', /JSON object/],
      ['{"messages":[]}', /^model: /],
      ['{"model":', /not valid JSON/],
    ] as const) {
      const res = await post(gw.url, body);
      expect(res.statusCode).toBe(400);
      expect((await res.body.json()) as any).toMatchObject({ type: 'error', error: { message: expect.stringMatching(message) } });
    }
    expect(native.traffic).toHaveLength(0);
  });
});

describe('the billing block', () => {
  const request = {
    model: 'llama-native',
    max_tokens: 16,
    system: [BILLING, { type: 'text', text: 'Be brief.' }],
    messages: [{ role: 'user', content: 'hi' }],
  };

  it('is dropped toward a local backend, the rest re-serialised in order', async () => {
    const res = await post(gw.url, JSON.stringify(request));
    await res.body.dump();
    expect(native.traffic[0].text).toBe(JSON.stringify({ ...request, system: [{ type: 'text', text: 'Be brief.' }] }));
  });

  it('is kept toward a hosted service (translated there)', async () => {
    await client().messages.create({ ...request, model: 'gpt-hosted' } as Anthropic.MessageCreateParamsNonStreaming);
    expect(hosted.traffic[0].json.messages[0]).toEqual({ role: 'system', content: `${BILLING.text}\nBe brief.` });
  });

  it('is kept toward a family whose profile says it is a hosted service (characteristics.hosted_service), whatever its name', async () => {
    const service = await new FakeBackend({ family: 'auto', name: 'service', models: [{ name: 'svc-model' }] }).start();
    const endpoints = [endpoint('service', 'auto', service.url)];
    const sent = async (g: Started) => {
      service.reset();
      const res = await post(g.url, JSON.stringify({ ...request, model: 'svc-model' }));
      await res.body.dump();
      expect(res.statusCode).toBe(200);
      return service.traffic[0].json.messages[0];
    };
    const plain = await startGateway({ discovery: { static: { endpoints } } });
    const flagged = await startGateway({
      proxy: { profiles_dir: customProfiles({ auto: (p) => (p.characteristics.hosted_service = true) }) },
      discovery: { static: { endpoints } },
    });
    try {
      // `auto` is an engine you run unless its profile says otherwise: the block is left out.
      expect(await sent(plain)).toEqual({ role: 'system', content: 'Be brief.' });
      expect(await sent(flagged)).toEqual({ role: 'system', content: `${BILLING.text}\nBe brief.` });
    } finally {
      await closeAll(flagged, [service]);
      await plain.close();
    }
  });

  it('is kept everywhere with translators.msgapi.strip_billing_header: false', async () => {
    const keep = await startGateway({
      translators: { msgapi: { strip_billing_header: false } },
      discovery: { static: { endpoints: [endpoint('native', 'localrunner', native.url)] } },
    });
    try {
      const body = JSON.stringify(request);
      const res = await post(keep.url, body);
      await res.body.dump();
      expect(native.traffic[0].text).toBe(body);
    } finally {
      await keep.close();
    }
  });
});

describe('backend errors in passthrough', () => {
  const create = () => client().messages.create({ model: 'llama-native', max_tokens: 8, messages: [{ role: 'user', content: 'x' }] });

  it('wraps a llama.cpp-style error: status kept, its message inside, the type named for the status', async () => {
    native.behaviour.status = 500;
    const err = await create().catch((e) => e);
    expect(err).toBeInstanceOf(Anthropic.InternalServerError);
    expect(err.status).toBe(500);
    expect(err.error).toEqual({ type: 'error', error: { type: 'api_error', message: 'fake native failing with 500' } });
    expect(err.headers.get('x-gw-mode')).toBe('passthrough');
  });

  it("wraps a 400 as invalid_request_error, and a stream request's error too", async () => {
    native.behaviour.status = 400;
    native.behaviour.errorBody = {
      contentType: 'application/json',
      body: '{"error":{"code":400,"message":"request (3024 tokens) exceeds the available context size (1024 tokens)","type":"exceed_context_size_error","n_ctx":1024}}',
    };
    const err = await create().catch((e) => e);
    expect(err).toBeInstanceOf(Anthropic.BadRequestError);
    expect(err.error).toEqual({
      type: 'error',
      error: { type: 'invalid_request_error', message: 'request (3024 tokens) exceeds the available context size (1024 tokens)' },
    });
    const streamed = await client()
      .messages.stream({ model: 'llama-native', max_tokens: 8, messages: [{ role: 'user', content: 'x' }] })
      .finalMessage()
      .catch((e) => e);
    expect(streamed).toBeInstanceOf(Anthropic.BadRequestError);
    expect(streamed.error.error.type).toBe('invalid_request_error');
  });

  it("wraps a body that is not JSON, keeping the backend's own headers", async () => {
    native.behaviour.status = 502;
    native.behaviour.errorBody = { contentType: 'text/html', body: '<html>Bad Gateway</html>' };
    const res = await post(gw.url, '{"model":"llama-native","max_tokens":8,"messages":[]}');
    expect(res.statusCode).toBe(502);
    expect(res.headers['content-type']).toBe('application/json');
    expect(res.headers['x-fake-backend']).toBe('native');
    expect(await res.body.json()).toEqual({ type: 'error', error: { type: 'api_error', message: '<html>Bad Gateway</html>' } });
  });

  it('passes a body already in the messages API shape unchanged', async () => {
    const body = '{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"req_1"}';
    native.behaviour.status = 529;
    native.behaviour.errorBody = { contentType: 'application/json', body };
    const res = await post(gw.url, '{"model":"llama-native","max_tokens":8,"messages":[]}');
    expect(res.statusCode).toBe(529);
    expect(await res.body.text()).toBe(body);
  });

  it("relays an error body over 64 KiB as it came, with the backend's status", async () => {
    native.behaviour.status = 500;
    const big = 'x'.repeat(200 * 1024);
    native.behaviour.errorBody = { contentType: 'text/plain', body: big };
    const res = await post(gw.url, '{"model":"llama-native","max_tokens":8,"messages":[]}');
    expect(res.statusCode).toBe(500);
    expect(res.headers['content-type']).toBe('text/plain');
    expect(res.headers['x-gw-mode']).toBe('passthrough');
    expect(await res.body.text()).toBe(big);
    expect(native.traffic).toHaveLength(1);
  });
});
