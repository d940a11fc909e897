// The messages API through the official SDK, the way users point it at the gateway.
import Anthropic from '@anthropic-ai/sdk';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { dirname } from 'node:path';
import { request } from 'undici';
import { FakeBackend } from '../../../engine/demo/index.js';
import { compareVersions } from '../../../engine/backends/version.js';
import { waitFor } from '../../helpers/wait.js';
import { endpoint, startGateway, writeConfig, type Started, NO_RATE_LIMITS } from '../../helpers/gateway.js';

// mlxsingle speaks chat-completions only (translation); localrunner declares native support (passthrough).
let chat: FakeBackend, native: FakeBackend, gw: Started;
const weather = {
  name: 'get_weather',
  description: 'Current weather',
  input_schema: { type: 'object' as const, properties: { location: { type: 'string' } }, required: ['location'] },
};

beforeAll(async () => {
  chat = await new FakeBackend({ family: 'mlxsingle', name: 'chat', reply: "I'll check the weather for you.", models: [{ name: 'qwen-chat' }] }).start();
  native = await new FakeBackend({ family: 'localrunner', name: 'native', reply: 'Native hello', models: [{ name: 'llama-native' }] }).start();
  gw = await startGateway({
    discovery: { static: { endpoints: [endpoint('chat', 'mlxsingle', chat.url), endpoint('native', 'localrunner', native.url)] } },
    model_aliases: { 'team-model': ['qwen-chat'], 'native-alias': ['llama-native'] },
  });
});
afterAll(async () => {
  await gw.close();
  await chat.stop();
  await native.stop();
});
beforeEach(() => {
  chat.reset();
  native.reset();
  chat.reply = "I'll check the weather for you.";
  chat.toolCalls = [];
});

const client = () => new Anthropic({ baseURL: `${gw.url}/gw/msgapi`, apiKey: 'sk-ant-test', maxRetries: 0 });

describe('messages.create (translation)', () => {
  it('answers text with system and stop sequences mapped for the backend', async () => {
    // `temperature` is a messages-API field this SDK version's types leave out; clients send it.
    const params = {
      model: 'qwen-chat',
      max_tokens: 64,
      system: 'Be brief.',
      stop_sequences: ['\n\nUser:'],
      temperature: 0.2,
      messages: [{ role: 'user' as const, content: 'Hello?' }],
    };
    const { data, response } = await client()
      .messages.create(params as Anthropic.MessageCreateParamsNonStreaming)
      .withResponse();
    expect(data.id).toMatch(/^msg_01/);
    expect(data).toMatchObject({
      type: 'message',
      role: 'assistant',
      content: [{ type: 'text', text: "I'll check the weather for you." }],
      stop_reason: 'end_turn',
      stop_sequence: null,
    });
    expect(data.usage.input_tokens).toBeGreaterThan(0);
    expect(response.headers.get('x-gw-endpoint')).toBe('chat');
    expect(response.headers.get('x-gw-mode')).toBeNull();
    const sent = chat.traffic[0];
    expect(sent.url).toBe('/v1/chat/completions');
    expect(sent.json).toMatchObject({
      model: 'qwen-chat',
      max_tokens: 64,
      temperature: 0.2,
      stop: ['\n\nUser:'],
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'Hello?' },
      ],
    });
  });

  it('reports stop_sequence when the backend says which sequence stopped it', async () => {
    chat.behaviour.stopMatched = '\n\nUser:';
    const data = await client().messages.create({
      model: 'qwen-chat',
      max_tokens: 64,
      stop_sequences: ['\n\nUser:'],
      messages: [{ role: 'user', content: 'Hi' }],
    });
    expect(data).toMatchObject({ stop_reason: 'stop_sequence', stop_sequence: '\n\nUser:' });
  });

  it('makes a tool call, then takes the tool result turn', async () => {
    chat.toolCalls = [{ name: 'get_weather', arguments: '{"location":"Paris"}' }];
    const first = await client().messages.create({
      model: 'qwen-chat',
      max_tokens: 64,
      tools: [weather],
      tool_choice: { type: 'any' },
      messages: [{ role: 'user', content: 'Weather in Paris?' }],
    });
    expect(first.stop_reason).toBe('tool_use');
    const use = first.content.find((b) => b.type === 'tool_use')!;
    expect(use).toMatchObject({ type: 'tool_use', name: 'get_weather', input: { location: 'Paris' } });
    expect(chat.traffic[0].json).toMatchObject({
      tool_choice: 'required',
      tools: [{ type: 'function', function: { name: 'get_weather', parameters: weather.input_schema } }],
    });

    chat.toolCalls = [];
    chat.reply = 'It is 18°C in Paris.';
    const second = await client().messages.create({
      model: 'qwen-chat',
      max_tokens: 64,
      tools: [weather],
      messages: [
        { role: 'user', content: 'Weather in Paris?' },
        { role: 'assistant', content: first.content },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: (use as { id: string }).id, content: '18°C, sunny' }] },
      ],
    });
    expect(second.content).toEqual([{ type: 'text', text: 'It is 18°C in Paris.' }]);
    const sent = chat.traffic[1].json.messages;
    expect(sent.at(-2)).toMatchObject({
      role: 'assistant',
      tool_calls: [{ id: (use as { id: string }).id, function: { name: 'get_weather', arguments: '{"location":"Paris"}' } }],
    });
    expect(sent.at(-1)).toEqual({ role: 'tool', tool_call_id: (use as { id: string }).id, content: '18°C, sunny' });
  });

  it('brings a backend error back with its status in the messages error shape', async () => {
    chat.behaviour.status = 500;
    const err = await client()
      .messages.create({ model: 'qwen-chat', max_tokens: 8, messages: [{ role: 'user', content: 'x' }] })
      .catch((e) => e);
    expect(err).toBeInstanceOf(Anthropic.InternalServerError);
    expect(err.status).toBe(500);
    expect(err.error).toEqual({ type: 'error', error: { type: 'api_error', message: 'fake chat failing with 500' } });
  });

  it('resolves an alias and sends the real model name', async () => {
    const data = await client().messages.create({ model: 'team-model', max_tokens: 8, messages: [{ role: 'user', content: 'x' }] });
    expect(data.content[0]).toMatchObject({ type: 'text' });
    expect(chat.traffic[0].json.model).toBe('qwen-chat');
  });

  it('rejects an unknown model before any backend, in the messages error shape', async () => {
    const err = await client()
      .messages.create({ model: 'no-such-model', max_tokens: 8, messages: [{ role: 'user', content: 'x' }] })
      .catch((e) => e);
    expect(err.status).toBe(404);
    expect(err).toBeInstanceOf(Anthropic.NotFoundError);
    expect(err.error).toMatchObject({ type: 'error', error: { type: 'not_found_error', code: 'MODEL_NOT_FOUND' } });
  });
});

describe('messages.stream (translation)', () => {
  it('streams text; the accumulated message equals what the backend produced', async () => {
    chat.behaviour.chunkDelayMs = 5;
    const stream = client().messages.stream({ model: 'qwen-chat', max_tokens: 64, messages: [{ role: 'user', content: 'Hello?' }] });
    const types: string[] = [];
    stream.on('streamEvent', (e) => types.push(e.type));
    const final = await stream.finalMessage();
    expect(final.content).toEqual([{ type: 'text', text: "I'll check the weather for you." }]);
    expect(final.stop_reason).toBe('end_turn');
    expect(types[0]).toBe('message_start');
    expect(types.at(-1)).toBe('message_stop');
    expect(final.usage.output_tokens).toBeGreaterThan(0);
    expect(chat.traffic[0].json.stream).toBe(true);
  });

  it('streams text then a tool call; the accumulated message equals what the backend produced', async () => {
    chat.toolCalls = [{ name: 'get_weather', arguments: '{"location":"Paris","unit":"celsius"}' }];
    const final = await client()
      .messages.stream({ model: 'qwen-chat', max_tokens: 64, tools: [weather], messages: [{ role: 'user', content: 'Weather?' }] })
      .finalMessage();
    expect(final.content).toEqual([
      { type: 'text', text: "I'll check the weather for you." },
      { type: 'tool_use', id: 'call_chat_0', name: 'get_weather', input: { location: 'Paris', unit: 'celsius' } },
    ]);
    expect(final.stop_reason).toBe('tool_use');
  });

  it('turns a backend failure mid-stream into an error event', async () => {
    chat.reply = 'one two three four five';
    chat.behaviour.resetAfterChunks = 3;
    const err = await client()
      .messages.stream({ model: 'qwen-chat', max_tokens: 64, messages: [{ role: 'user', content: 'x' }] })
      .finalMessage()
      .catch((e) => e);
    expect(err).toBeInstanceOf(Error);
    expect(String(err.message ?? err)).toMatch(/broke off the reply/);
  });

  it('delivers each event as soon as it is formed', async () => {
    chat.reply = 'a b c';
    const texts: string[] = [];
    // Lock-step: the backend sends text piece k (chunk k + 1, after the role chunk) only once the
    // client has the text of piece k - 1, so a translator that held events back would stall.
    chat.behaviour.beforeChunk = (i) => waitFor(() => texts.length >= Math.min(Math.max(i - 1, 0), 3), `text event ${i - 1}`).then(() => undefined);
    const stream = client().messages.stream({ model: 'qwen-chat', max_tokens: 64, messages: [{ role: 'user', content: 'x' }] });
    stream.on('text', (t) => texts.push(t));
    await stream.finalMessage();
    expect(texts).toEqual(['a', ' b', ' c']);
  });
});

describe('passthrough', () => {
  it('forwards the original bytes to a backend with native support and returns its reply unchanged', async () => {
    const body = '{"model":"llama-native","max_tokens":32,"messages":[{"role":"user","content":"hi"}],"some_future_field":{"x":1}}';
    const res = await request(`${gw.url}/gw/msgapi/v1/messages`, {
      method: 'POST',
      body,
      headers: { 'content-type': 'application/json', 'msgapi-version': '2023-06-01' },
    });
    const reply = (await res.body.json()) as any;
    expect(res.statusCode).toBe(200);
    expect(res.headers['x-gw-mode']).toBe('passthrough');
    expect(res.headers['x-gw-endpoint']).toBe('native');
    expect(native.traffic[0].url).toBe('/v1/messages');
    expect(native.traffic[0].text).toBe(body);
    expect(reply).toEqual({
      id: 'msg_01native1',
      type: 'message',
      role: 'assistant',
      model: 'llama-native',
      content: [{ type: 'text', text: 'Native hello' }],
      stop_reason: 'end_turn',
      stop_sequence: null,
      usage: { input_tokens: 7, output_tokens: 5 },
    });
  });

  it('streams a native reply through unchanged, via the SDK', async () => {
    const final = await client()
      .messages.stream({ model: 'native-alias', max_tokens: 32, messages: [{ role: 'user', content: 'hi' }] })
      .finalMessage();
    expect(final.content).toEqual([{ type: 'text', text: 'Native hello' }]);
    expect(native.traffic[0].json.model).toBe('llama-native');
  });
});

describe('headers toward the backend', () => {
  const headers = {
    'content-type': 'application/json',
    'x-api-key': 'sk-ant-secret',
    'anthropic-version': '2023-06-01',
    'anthropic-beta': 'mid-conversation-system-2026-04-07',
    'x-stainless-os': 'Linux',
    'msgapi-version': '2023-06-01',
    'x-team': 'research',
    authorization: 'Bearer for-the-backend',
  };
  const messagesApiHeaders = ['x-api-key', 'anthropic-version', 'anthropic-beta', 'x-stainless-os', 'msgapi-version'];
  const send = (base: string, model: string) =>
    request(`${base}/gw/msgapi/v1/messages`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ model, max_tokens: 8, messages: [{ role: 'user', content: 'x' }] }),
    }).then((r) => r.body.dump());

  it("leave the messages API's own behind when the request is translated", async () => {
    await send(gw.url, 'qwen-chat');
    const got = chat.traffic[0].headers;
    for (const name of messagesApiHeaders) expect(got[name], name).toBeUndefined();
    expect(got).toMatchObject({ 'x-team': 'research', authorization: 'Bearer for-the-backend' });
  });

  it('keep them in passthrough, where the backend speaks that API', async () => {
    await send(gw.url, 'llama-native');
    expect(native.traffic[0].headers).toMatchObject(Object.fromEntries(messagesApiHeaders.map((n) => [n, headers[n as keyof typeof headers]])));
  });

  it("still carry an endpoint's own configured x-api-key when translated", async () => {
    const keyed = await startGateway({
      discovery: { static: { endpoints: [endpoint('chat', 'mlxsingle', chat.url, { headers: { 'X-Api-Key': 'backend-key' } })] } },
    });
    try {
      await send(keyed.url, 'qwen-chat');
      expect(chat.traffic[0].headers['x-api-key']).toBe('backend-key');
    } finally {
      await keyed.close();
    }
  });
});

describe('passthrough min_version', () => {
  it('translates for an endpoint whose configured version is below the profile minimum', async () => {
    const old = await startGateway({ discovery: { static: { endpoints: [endpoint('old', 'localrunner', native.url, { version: '0.13.2' })] } } });
    try {
      const res = await request(`${old.url}/gw/msgapi/v1/messages`, {
        method: 'POST',
        body: JSON.stringify({ model: 'llama-native', max_tokens: 8, messages: [{ role: 'user', content: 'hi' }] }),
      });
      const reply = (await res.body.json()) as any;
      expect(res.statusCode).toBe(200);
      expect(res.headers['x-gw-mode']).toBeUndefined();
      expect(native.traffic[0].url).toBe('/v1/chat/completions');
      expect(reply.content).toEqual([{ type: 'text', text: 'Native hello' }]);
    } finally {
      await old.close();
    }
  });

  it("follows a reload that raises the configured version (decided when the endpoint's settings apply)", async () => {
    const config = (version: string) => ({
      pipelines: { watch: false },
      discovery: { static: { endpoints: [endpoint('old', 'localrunner', native.url, { version })] } },
    });
    const g = await startGateway(config('0.13.2'));
    try {
      const mode = async () => {
        const res = await request(`${g.url}/gw/msgapi/v1/messages`, {
          method: 'POST',
          body: JSON.stringify({ model: 'llama-native', max_tokens: 8, messages: [{ role: 'user', content: 'hi' }] }),
        });
        await res.body.dump();
        return res.headers['x-gw-mode'] ?? 'translation';
      };
      expect(await mode()).toBe('translation');
      const base = {
        server: { rate_limits: NO_RATE_LIMITS, host: '127.0.0.1', port: 0, shutdown_timeout: '2s' },
        logging: { level: 'debug' },
        proxy: { profiles_dir: '/nonexistent/profiles' },
      };
      writeConfig({ ...base, ...config('0.14.0'), pipelines: { dir: '/nonexistent/pipelines', watch: false } }, dirname(g.configFile));
      expect(await g.gw.reload('test')).toBe(true);
      expect(await mode()).toBe('passthrough');
    } finally {
      await g.close();
    }
  });

  it('compares versions numerically, build numbers too', () => {
    expect(compareVersions('0.11.1', '0.11.0')).toBe(1);
    expect(compareVersions('0.9.9', '0.11.1')).toBe(-1);
    expect(compareVersions('b4847', 'b4847')).toBe(0);
    expect(compareVersions('b4900', 'b4847')).toBe(1);
    expect(compareVersions('dev', '0.1')).toBeUndefined();
  });
});

describe('count_tokens and models', () => {
  it('estimates tokens without running a model', async () => {
    const res = await client().messages.countTokens({ model: 'qwen-chat', system: 'abcd', messages: [{ role: 'user', content: 'hello world!' }] });
    expect(res).toMatchObject({ input_tokens: 4 });
    const raw = await request(`${gw.url}/gw/msgapi/v1/messages/count_tokens`, {
      method: 'POST',
      body: JSON.stringify({ model: 'qwen-chat', max_tokens: 1, messages: [{ role: 'user', content: 'x'.repeat(40) }] }),
    });
    expect(await raw.body.json()).toEqual({ input_tokens: 10, output_tokens: 0, total_tokens: 10 });
    expect(chat.traffic).toHaveLength(0);
  });

  it('lists the chat models and their aliases', async () => {
    const ids: string[] = [];
    for await (const m of client().models.list()) ids.push(m.id);
    expect(ids.sort()).toEqual(['llama-native', 'native-alias', 'qwen-chat', 'team-model']);
    const raw = (await (await request(`${gw.url}/gw/msgapi/v1/models`)).body.json()) as any;
    expect(raw.data[0]).toEqual({
      id: 'qwen-chat',
      name: 'qwen-chat',
      created: 1732000000,
      description: expect.stringContaining('mlxsingle'),
      type: 'chat',
      display_name: 'qwen-chat',
      created_at: '2024-11-19T07:06:40.000Z',
    });
  });
});

describe('limits and switches', () => {
  it('refuses a body over max_message_size with 413 before any backend', async () => {
    const small = await startGateway({
      translators: { msgapi: { max_message_size: 256 } },
      discovery: { static: { endpoints: [endpoint('chat', 'mlxsingle', chat.url)] } },
    });
    try {
      const res = await request(`${small.url}/gw/msgapi/v1/messages`, {
        method: 'POST',
        body: JSON.stringify({ model: 'qwen-chat', max_tokens: 8, messages: [{ role: 'user', content: 'x'.repeat(1000) }] }),
      });
      expect(res.statusCode).toBe(413);
      expect((await res.body.json()) as any).toMatchObject({ type: 'error', error: { code: 'BODY_TOO_LARGE' } });
      expect(chat.traffic).toHaveLength(0);
    } finally {
      await small.close();
    }
  });

  it('answers 404 on every msgapi route when the translator is disabled', async () => {
    const off = await startGateway({
      translators: { msgapi: { enabled: false } },
      discovery: { static: { endpoints: [endpoint('chat', 'mlxsingle', chat.url)] } },
    });
    try {
      for (const [method, path] of [
        ['POST', '/v1/messages'],
        ['POST', '/v1/messages/count_tokens'],
        ['GET', '/v1/models'],
      ]) {
        const res = await request(`${off.url}/gw/msgapi${path}`, { method: method as 'GET', body: method === 'POST' ? '{}' : undefined });
        await res.body.dump();
        expect(res.statusCode).toBe(404);
      }
    } finally {
      await off.close();
    }
  });

  it('refuses a body nested deeper than the limit with 400 naming it, on both routes and in both modes, without an error log', async () => {
    /** A tool_use input nested `depth` objects deep (the message around it adds 5 levels). */
    const nested = (model: string, depth: number) =>
      `{"model":"${model}","max_tokens":8,"system":[{"type":"text","text":"x-anthropic-billing-header: cch=1;"}],"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"f","input":${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"ok"}]}]}`;
    const errorsBefore = gw.logs.filter((l) => l.level >= 50).length;
    for (const model of ['qwen-chat', 'llama-native']) {
      for (const path of ['/v1/messages', '/v1/messages/count_tokens']) {
        const res = await request(`${gw.url}/gw/msgapi${path}`, { method: 'POST', body: nested(model, 200_000) });
        expect(res.statusCode).toBe(400);
        expect((await res.body.json()) as any).toMatchObject({
          type: 'error',
          error: { code: 'BAD_REQUEST', message: expect.stringContaining('more than 256 levels deep') },
        });
        // Within the limit, the same request is served.
        const ok = await request(`${gw.url}/gw/msgapi${path}`, { method: 'POST', body: nested(model, 250) });
        await ok.body.dump();
        expect(ok.statusCode).toBe(200);
      }
    }
    expect(gw.logs.filter((l) => l.level >= 50).length).toBe(errorsBefore);
    expect(chat.traffic.length + native.traffic.length).toBe(2);
  });

  it('gives 400 naming the field for a request that cannot be translated', async () => {
    for (const [body, field] of [
      ['{"model":"qwen-chat","messages":[]}', /^max_tokens: /],
      ['{"model":"qwen-chat","max_tokens":8,"messages":"hi"}', /^messages: /],
      ['{"model":"qwen-chat","max_tokens":8,"messages":[{"role":"tool","content":"x"}]}', /^messages\[0\]\.role: /],
    ] as const) {
      const res = await request(`${gw.url}/gw/msgapi/v1/messages`, { method: 'POST', body });
      expect(res.statusCode).toBe(400);
      expect((await res.body.json()) as any).toMatchObject({ type: 'error', error: { code: 'BAD_REQUEST', message: expect.stringMatching(field) } });
    }
    expect(chat.traffic).toHaveLength(0);
  });

  it('logs at debug what translation dropped', async () => {
    await client().messages.create({
      model: 'qwen-chat',
      max_tokens: 8,
      messages: [
        {
          role: 'user',
          content: [
            { type: 'text', text: 'x' },
            { type: 'document', source: { type: 'text', media_type: 'text/plain', data: 'doc' } },
          ],
        },
      ],
      ...({ context_management: {} } as object),
    });
    const line = gw.logs.find((l) => l.msg?.startsWith('translation to chat-completions dropped'));
    expect(line).toMatchObject({ level: 20, endpoint: 'chat', dropped: ['field context_management', 'user block document'] });
  });
});

describe('translator statistics', () => {
  it('move with each request', async () => {
    const before = ((await (await request(`${gw.url}/internal/stats/translators`)).body.json()) as any).translators[0];
    await client().messages.create({ model: 'qwen-chat', max_tokens: 8, messages: [{ role: 'user', content: 'x' }] });
    await client()
      .messages.stream({ model: 'llama-native', max_tokens: 8, messages: [{ role: 'user', content: 'x' }] })
      .finalMessage();
    await client()
      .messages.create({ model: 'gone', max_tokens: 8, messages: [{ role: 'user', content: 'x' }] })
      .catch(() => undefined);
    const after = (await (await request(`${gw.url}/internal/stats/translators`)).body.json()) as any;
    const t = after.translators[0];
    expect(t.translator_name).toBe('msgapi');
    expect(t.total_requests - before.total_requests).toBe(3);
    expect(t.translation_requests - before.translation_requests).toBe(1);
    expect(t.passthrough_requests - before.passthrough_requests).toBe(1);
    expect(t.streaming_requests - before.streaming_requests).toBe(1);
    expect(t.failed_requests - before.failed_requests).toBe(1);
    expect(t.fallback_no_compatible_endpoints - before.fallback_no_compatible_endpoints).toBe(1);
    expect(t.fallback_cannot_passthrough - before.fallback_cannot_passthrough).toBe(1);
    expect(t.success_rate).toMatch(/^\d+\.\d\d%$/);
    expect(Object.keys(after.summary)).toEqual([
      'total_translators',
      'active_translators',
      'total_requests',
      'total_passthrough',
      'total_translations',
      'total_streaming',
      'total_non_streaming',
      'overall_success_rate',
      'overall_passthrough_rate',
    ]);
    // The Responses API's translator is listed too, idle here.
    expect(after.summary).toMatchObject({ total_translators: 2, active_translators: 1 });
    expect(after.translators.map((x: { translator_name: string }) => x.translator_name)).toEqual(['msgapi', 'responses']);
  });
});
