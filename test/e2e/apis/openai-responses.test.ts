// The Responses API for every model (issue 21, second part): the official openai package and the
// Vercel AI SDK's default OpenAI provider against /gw/openai/v1/responses reach a model on an
// engine that has the route (sent natively) and on chat-only engines (translated to
// chat-completions and back): plain, streamed, with a function tool round trip, with a JSON
// schema, with reasoning. On a chat-only family's own prefix the route is filled by the same
// translation; previous_response_id is a 400 unless the bounded store is on.
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { generateText, jsonSchema, streamText, tool } from 'ai';
import { createOpenAI } from '@ai-sdk/openai';
import { FakeBackend } from '../../../engine/demo/index.js';
import { closeAll, endpoint, startGateway, type Started } from '../../helpers/gateway.js';
import { waitFor } from '../../helpers/wait.js';

let gw: Started;
let fakes: { mlx: FakeBackend; dmr: FakeBackend; llama: FakeBackend; vllm: FakeBackend };
let client: OpenAI;

const WEATHER = { name: 'get_weather', arguments: '{"city":"Paris"}' };

beforeAll(async () => {
  fakes = {
    mlx: await new FakeBackend({ family: 'mlxsingle', name: 'mlx', reply: 'Bonjour from mlx', models: [{ name: 'mlx-community/Qwen3-4B' }] }).start(),
    dmr: await new FakeBackend({ family: 'containerrunner', name: 'dmr', reply: 'Hello from dmr', models: [{ name: 'ai/smollm2' }] }).start(),
    llama: await new FakeBackend({ family: 'cppengine', name: 'llama', reply: 'Hello from llama', models: [{ name: 'qwen3-8b' }] }).start(),
    vllm: await new FakeBackend({ family: 'pagedengine', name: 'vllm', reply: 'Hello from vllm', models: [{ name: 'org/Mistral-7B' }] }).start(),
  };
  gw = await startGateway({
    model_aliases: { small: ['mlx-community/Qwen3-4B'] },
    discovery: { static: { endpoints: Object.values(fakes).map((f) => endpoint(f.name, f.family, f.url)) } },
  });
  client = new OpenAI({ baseURL: `${gw.url}/gw/openai/v1`, apiKey: 'unused', maxRetries: 0 });
  await waitFor(async () => ((await client.models.list()).data.length >= 4 ? true : undefined), 'every family discovered');
});
afterAll(() => closeAll(gw, Object.values(fakes)));

const lastChat = (f: FakeBackend) => f.traffic.filter((t) => t.url.endsWith('/chat/completions')).at(-1)!;

describe('responses.create across families', () => {
  it('reaches a chat-only engine translated, and engines that have the route natively', async () => {
    for (const [model, fake, mode, path] of [
      ['mlx-community/Qwen3-4B', fakes.mlx, 'translated', '/v1/chat/completions'],
      ['ai/smollm2', fakes.dmr, 'translated', '/engines/v1/chat/completions'],
      ['qwen3-8b', fakes.llama, 'passthrough', '/v1/responses'],
      ['org/Mistral-7B', fakes.vllm, 'passthrough', '/v1/responses'],
    ] as const) {
      const { data, response } = await client.responses.create({ model, input: 'hi', instructions: 'Be brief.' }).withResponse();
      expect(data.output_text).toBe(`${model === 'mlx-community/Qwen3-4B' ? 'Bonjour' : 'Hello'} from ${fake.name}`);
      expect(data.status).toBe('completed');
      expect(response.headers.get('x-gw-endpoint')).toBe(fake.name);
      expect(response.headers.get('x-gw-mode')).toBe(mode === 'passthrough' ? 'passthrough' : null);
      expect(fake.traffic.at(-1)!.url).toBe(path);
      if (mode === 'translated') {
        expect(fake.traffic.at(-1)!.json).toMatchObject({
          model,
          messages: [
            { role: 'system', content: 'Be brief.' },
            { role: 'user', content: 'hi' },
          ],
        });
        expect(data).toMatchObject({
          object: 'response',
          id: expect.stringMatching(/^resp_/),
          model,
          usage: { input_tokens: expect.any(Number), output_tokens: expect.any(Number) },
        });
      }
    }
  });

  it('an alias resolves to its real name before translation', async () => {
    const r = await client.responses.create({ model: 'small', input: 'hi' });
    expect(r.output_text).toBe('Bonjour from mlx');
    expect(lastChat(fakes.mlx).json.model).toBe('mlx-community/Qwen3-4B');
  });

  /** Three families: one chat-only (translated), two with the route (native). */
  const THREE = [
    ['mlx-community/Qwen3-4B', 'mlx', false],
    ['qwen3-8b', 'llama', true],
    ['org/Mistral-7B', 'vllm', true],
  ] as const;
  const reply = (name: string) => `${name === 'mlx' ? 'Bonjour' : 'Hello'} from ${name}`;

  it("streams through the SDK's event accumulator (indexes, ids and order checked by it), on three families", async () => {
    for (const [model, name, native] of THREE) {
      const stream = client.responses.stream({ model, input: 'hi' });
      const types: string[] = [];
      let text = '';
      for await (const event of stream) {
        types.push(event.type);
        if (event.type === 'response.output_text.delta') text += event.delta;
      }
      const final = await stream.finalResponse();
      expect(text).toBe(reply(name));
      expect(final.output_text).toBe(reply(name));
      expect(types[0]).toBe('response.created');
      expect(types.at(-1)).toBe('response.completed');
      const fake = fakes[name];
      expect(fake.traffic.at(-1)!.url).toBe(native ? '/v1/responses' : '/v1/chat/completions');
      expect(fake.traffic.at(-1)!.json.stream).toBe(true);
    }
  });

  it('a function tool round trip, on three families', async () => {
    const tools: OpenAI.Responses.Tool[] = [
      {
        type: 'function',
        name: 'get_weather',
        description: 'Weather',
        parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
        strict: true,
      },
    ];
    for (const [model, name, native] of THREE) {
      const fake = fakes[name];
      fake.toolCalls = [WEATHER];
      try {
        const first = await client.responses.create({ model, input: 'Weather in Paris?', tools });
        const call = first.output.find((o) => o.type === 'function_call') as OpenAI.Responses.ResponseFunctionToolCall;
        expect(call).toMatchObject({ name: 'get_weather', arguments: '{"city":"Paris"}', status: 'completed' });
        if (!native)
          expect(lastChat(fake).json.tools).toEqual([
            {
              type: 'function',
              function: { name: 'get_weather', description: 'Weather', parameters: (tools[0] as OpenAI.Responses.FunctionTool).parameters, strict: true },
            },
          ]);
        fake.toolCalls = [];
        const second = await client.responses.create({
          model,
          tools,
          input: [
            { role: 'user', content: 'Weather in Paris?' },
            call as OpenAI.Responses.ResponseInputItem,
            { type: 'function_call_output', call_id: call.call_id, output: '18°C' },
          ],
        });
        expect(second.output_text).toBe(reply(name));
        if (native) {
          expect(fake.traffic.at(-1)!.json.input.at(-1)).toEqual({ type: 'function_call_output', call_id: call.call_id, output: '18°C' });
        } else {
          expect(lastChat(fake).json.messages).toEqual([
            { role: 'user', content: 'Weather in Paris?' },
            {
              role: 'assistant',
              content: null,
              tool_calls: [{ id: call.call_id, type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }],
            },
            { role: 'tool', tool_call_id: call.call_id, content: '18°C' },
          ]);
        }
      } finally {
        fake.toolCalls = [];
      }
    }
  });

  it('a streamed function call', async () => {
    fakes.dmr.toolCalls = [WEATHER];
    try {
      const stream = client.responses.stream({
        model: 'ai/smollm2',
        input: 'Weather?',
        tools: [{ type: 'function', name: 'get_weather', parameters: { type: 'object', properties: {} }, strict: false }],
      });
      let args = '';
      for await (const e of stream) if (e.type === 'response.function_call_arguments.delta') args += e.delta;
      const final = await stream.finalResponse();
      expect(args).toBe('{"city":"Paris"}');
      expect(final.output.find((o) => o.type === 'function_call')).toMatchObject({ name: 'get_weather', arguments: '{"city":"Paris"}' });
    } finally {
      fakes.dmr.toolCalls = [];
    }
  });

  it('a JSON schema: response_format where translated, text.format as sent where native', async () => {
    const schema = { type: 'object', properties: { answer: { type: 'string' } }, required: ['answer'], additionalProperties: false };
    const format = { type: 'json_schema' as const, name: 'answer', schema, strict: true };
    for (const [model, name, native] of THREE) {
      const r = await client.responses.create({ model, input: 'x', text: { format } });
      expect(r.output_text).toBe(reply(name));
      const sent = fakes[name].traffic.at(-1)!.json;
      if (native) expect(sent.text).toEqual({ format });
      else expect(sent.response_format).toEqual({ type: 'json_schema', json_schema: { name: 'answer', schema, strict: true } });
    }
  });

  it('reasoning_content becomes a reasoning item, whole and streamed', async () => {
    fakes.mlx.reasoning = 'Think first.';
    try {
      const r = await client.responses.create({ model: 'mlx-community/Qwen3-4B', input: 'hi' });
      expect(r.output[0]).toMatchObject({ type: 'reasoning', content: [{ type: 'reasoning_text', text: 'Think first.' }] });
      expect(r.output_text).toBe('Bonjour from mlx');
      const stream = client.responses.stream({ model: 'mlx-community/Qwen3-4B', input: 'hi' });
      let thought = '';
      for await (const e of stream) if (e.type === 'response.reasoning_text.delta') thought += e.delta;
      expect(thought).toBe('Think first.');
      expect((await stream.finalResponse()).output.map((o) => o.type)).toEqual(['reasoning', 'message']);
    } finally {
      fakes.mlx.reasoning = '';
    }
  });

  it('max_output_tokens reached: status incomplete', async () => {
    fakes.mlx.behaviour.finishReason = 'length';
    try {
      const r = await client.responses.create({ model: 'mlx-community/Qwen3-4B', input: 'hi', max_output_tokens: 3 });
      expect(r).toMatchObject({ status: 'incomplete', incomplete_details: { reason: 'max_output_tokens' } });
      expect(lastChat(fakes.mlx).json.max_tokens).toBe(3);
    } finally {
      fakes.mlx.behaviour.finishReason = null;
    }
  });

  it('a backend error keeps its status in the OpenAI error shape; a request it cannot read is 400 naming the field, no backend asked', async () => {
    fakes.mlx.behaviour.status = 422;
    try {
      const err = await client.responses.create({ model: 'mlx-community/Qwen3-4B', input: 'hi' }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(OpenAI.UnprocessableEntityError);
    } finally {
      fakes.mlx.behaviour.status = 0;
    }
    const before = fakes.mlx.traffic.length;
    const bad = await client.responses.create({ model: 'mlx-community/Qwen3-4B', input: [{ role: 'robot', content: 'x' }] as never }).catch((e: unknown) => e);
    expect(bad).toBeInstanceOf(OpenAI.BadRequestError);
    expect((bad as Error).message).toContain('input[0].role');
    expect(fakes.mlx.traffic.length).toBe(before);
  });

  it('previous_response_id on a translated request: 400 saying how, while the store is off', async () => {
    const err = await client.responses
      .create({ model: 'mlx-community/Qwen3-4B', input: 'and then?', previous_response_id: 'resp_123' })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect((err as Error).message).toContain('translators.responses.store');
  });

  it("the route on a chat-only family's own prefix is translated; families that have it keep their proxy route", async () => {
    const own = new OpenAI({ baseURL: `${gw.url}/gw/mlxsingle/v1`, apiKey: 'unused', maxRetries: 0 });
    const r = await own.responses.create({ model: 'mlx-community/Qwen3-4B', input: 'hi' });
    expect(r.output_text).toBe('Bonjour from mlx');
    expect(fakes.mlx.traffic.at(-1)!.url).toBe('/v1/chat/completions');
    const native = new OpenAI({ baseURL: `${gw.url}/gw/cppengine/v1`, apiKey: 'unused', maxRetries: 0 });
    await native.responses.create({ model: 'qwen3-8b', input: 'hi' });
    expect(fakes.llama.traffic.at(-1)!.url).toBe('/v1/responses');
    // The rest of the chat-only family's prefix is its proxy route, as before.
    const models = await request(`${gw.url}/gw/mlxsingle/v1/models`);
    expect(models.statusCode).toBe(200);
    await models.body.dump();
  });

  it("answers the SDKs' preflight as the other routes do", async () => {
    const res = await request(`${gw.url}/gw/openai/v1/responses`, {
      method: 'OPTIONS',
      headers: {
        origin: 'http://app.example',
        'access-control-request-method': 'POST',
        'access-control-request-headers': 'content-type, authorization, x-stainless-os',
      },
    });
    await res.body.dump();
    expect(res.statusCode).toBe(204);
    expect(res.headers['access-control-allow-origin']).toBe('*');
    expect(String(res.headers['access-control-allow-headers'])).toContain('x-stainless-os');
    const prefix = await request(`${gw.url}/gw/mlxsingle/v1/responses`, {
      method: 'OPTIONS',
      headers: { origin: 'http://app.example', 'access-control-request-method': 'POST' },
    });
    await prefix.body.dump();
    expect(prefix.statusCode).toBe(204);
  });

  it('counts as the responses translator in /internal/stats/translators', async () => {
    const res = await request(`${gw.url}/internal/stats/translators`);
    const body = (await res.body.json()) as { translators: Array<{ translator_name: string; translation_requests: number; passthrough_requests: number }> };
    const t = body.translators.find((x) => x.translator_name === 'responses')!;
    expect(t.translation_requests).toBeGreaterThan(5);
    expect(t.passthrough_requests).toBeGreaterThanOrEqual(2);
  });
});

describe("the Vercel AI SDK's default OpenAI provider (the Responses API) on a chat-only family", () => {
  const openai = () => createOpenAI({ baseURL: `${gw.url}/gw/openai/v1`, apiKey: 'sk-test' });
  const weather = tool({
    description: 'the weather',
    inputSchema: jsonSchema<{ city: string }>({ type: 'object', properties: { city: { type: 'string' } }, required: ['city'] }),
  });

  it('generateText and streamText', async () => {
    const { text, usage } = await generateText({ model: openai()('mlx-community/Qwen3-4B'), prompt: 'hello' });
    expect(text).toBe('Bonjour from mlx');
    expect(usage.outputTokens).toBeGreaterThan(0);
    const result = streamText({ model: openai()('mlx-community/Qwen3-4B'), prompt: 'hello' });
    let streamed = '';
    for await (const part of result.textStream) streamed += part;
    expect(streamed).toBe('Bonjour from mlx');
    expect(await result.finishReason).toBe('stop');
  });

  it('generateText and streamText with a tool', async () => {
    fakes.mlx.toolCalls = [WEATHER];
    try {
      const { toolCalls } = await generateText({ model: openai()('mlx-community/Qwen3-4B'), prompt: 'weather?', tools: { get_weather: weather } });
      expect(toolCalls[0]).toMatchObject({ toolName: 'get_weather', input: { city: 'Paris' } });
      const result = streamText({ model: openai()('mlx-community/Qwen3-4B'), prompt: 'weather?', tools: { get_weather: weather } });
      const calls = await result.toolCalls;
      expect(calls[0]).toMatchObject({ toolName: 'get_weather', input: { city: 'Paris' } });
      expect(await result.finishReason).toBe('tool-calls');
    } finally {
      fakes.mlx.toolCalls = [];
    }
  });
});

describe('previous_response_id with translators.responses.store on', () => {
  let stored: Started;
  let c: OpenAI;
  beforeAll(async () => {
    stored = await startGateway({
      translators: { responses: { store: { max_responses: 100 } } },
      discovery: { static: { endpoints: [endpoint('mlx', 'mlxsingle', fakes.mlx.url), endpoint('llama', 'cppengine', fakes.llama.url)] } },
    });
    c = new OpenAI({ baseURL: `${stored.url}/gw/openai/v1`, apiKey: 'unused', maxRetries: 0 });
    await waitFor(async () => ((await c.models.list()).data.length >= 2 ? true : undefined), 'both discovered');
  });
  afterAll(() => closeAll(stored, []));

  it("continues a translated conversation by id: the earlier turns are sent again, the instructions are the new request's", async () => {
    const first = await c.responses.create({ model: 'mlx-community/Qwen3-4B', instructions: 'Old rules.', input: 'My name is Ada.' });
    expect((first as unknown as { store: boolean }).store).toBe(true);
    const second = await c.responses.create({
      model: 'mlx-community/Qwen3-4B',
      instructions: 'Be brief.',
      input: 'What is my name?',
      previous_response_id: first.id,
    });
    expect(second.previous_response_id).toBe(first.id);
    expect(lastChat(fakes.mlx).json.messages).toEqual([
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'My name is Ada.' },
      { role: 'assistant', content: 'Bonjour from mlx' },
      { role: 'user', content: 'What is my name?' },
    ]);
    // A third turn carries both before it, streamed this time.
    const stream = c.responses.stream({ model: 'mlx-community/Qwen3-4B', input: 'And again?', previous_response_id: second.id });
    const third = await stream.finalResponse();
    expect(lastChat(fakes.mlx).json.messages.map((m: { role: string }) => m.role)).toEqual(['user', 'assistant', 'user', 'assistant', 'user']);
    // An engine with its own Responses API gets the kept conversation as its input.
    await c.responses.create({ model: 'qwen3-8b', input: 'Last one.', previous_response_id: third.id });
    const sent = fakes.llama.traffic.at(-1)!.json;
    expect(sent.previous_response_id).toBeUndefined();
    expect(sent.input.map((i: { role?: string; type?: string }) => i.role ?? i.type)).toEqual([
      'user',
      'assistant',
      'user',
      'assistant',
      'user',
      'assistant',
      'user',
    ]);
  });

  it('a response asked with store: false is not kept; an unknown id is 400', async () => {
    const r = await c.responses.create({ model: 'mlx-community/Qwen3-4B', input: 'x', store: false });
    expect((r as unknown as { store: boolean }).store).toBe(false);
    const err = await c.responses.create({ model: 'mlx-community/Qwen3-4B', input: 'y', previous_response_id: r.id }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect((err as Error).message).toContain(`no stored response ${r.id}`);
  });
});

describe('reasoning effort toward an engine that takes it (passthrough off: llama.cpp translated to)', () => {
  let gw2: Started;
  beforeAll(async () => {
    gw2 = await startGateway({
      translators: { responses: { passthrough: false }, msgapi: { passthrough: false, thinking_effort: true } },
      discovery: { static: { endpoints: [endpoint('llama', 'cppengine', fakes.llama.url), endpoint('mlx', 'mlxsingle', fakes.mlx.url)] } },
    });
    const c = new OpenAI({ baseURL: `${gw2.url}/gw/openai/v1`, apiKey: 'unused', maxRetries: 0 });
    await waitFor(async () => ((await c.models.list()).data.length >= 2 ? true : undefined), 'both discovered');
  });
  afterAll(() => closeAll(gw2, []));

  it('reasoning.effort and a thinking budget become reasoning_effort where the profile lists the level, and are left out where it lists none', async () => {
    const c = new OpenAI({ baseURL: `${gw2.url}/gw/openai/v1`, apiKey: 'unused', maxRetries: 0 });
    await c.responses.create({ model: 'qwen3-8b', input: 'hi', reasoning: { effort: 'high' } });
    expect(lastChat(fakes.llama).json.reasoning_effort).toBe('high');
    await c.responses.create({ model: 'mlx-community/Qwen3-4B', input: 'hi', reasoning: { effort: 'high' } });
    expect(lastChat(fakes.mlx).json.reasoning_effort).toBeUndefined();
    const res = await request(`${gw2.url}/gw/msgapi/v1/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        model: 'qwen3-8b',
        max_tokens: 64,
        thinking: { type: 'enabled', budget_tokens: 2048 },
        messages: [{ role: 'user', content: 'hi' }],
      }),
    });
    expect(res.statusCode).toBe(200);
    await res.body.dump();
    expect(lastChat(fakes.llama).json.reasoning_effort).toBe('low');
  });
});
