// The official openai package pointed at the gateway, the way users do it: chat (plain, streamed,
// with tools), embeddings, the Responses API, and the models routes, in front of two endpoints
// of one family with different models.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import { FakeBackend } from '../../../engine/demo/index.js';
import { closeAll, endpoint, startGateway, type Started } from '../../helpers/gateway.js';

const weather = { name: 'get_weather', arguments: '{"city":"Paris","unit":"celsius"}' };
const tools = [{ type: 'function' as const, function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } }];
let paged1: FakeBackend, paged2: FakeBackend, gw: Started;

beforeAll(async () => {
  paged1 = await new FakeBackend({
    family: 'pagedengine',
    name: 'paged1',
    reply: 'Paged engine says hello',
    toolCalls: [weather],
    models: [{ name: 'Qwen2.5-7B', context: 32768 }, { name: 'bge-small' }],
  }).start();
  paged2 = await new FakeBackend({
    family: 'pagedengine',
    name: 'paged2',
    reply: 'The other one',
    models: [
      { name: 'Llama-3.1-8B', context: 131072 },
      { name: 'Qwen/Qwen3-4B', context: 40960 },
    ],
  }).start();
  gw = await startGateway({
    discovery: { static: { endpoints: [endpoint('paged1', 'pagedengine', paged1.url), endpoint('paged2', 'pagedengine', paged2.url)] } },
  });
});
afterAll(() => closeAll(gw, [paged1, paged2]));

const client = () => new OpenAI({ baseURL: `${gw.url}/gw/pagedengine/v1`, apiKey: 'sk-test', maxRetries: 0 });

describe('chat completions', () => {
  it('creates a chat completion', async () => {
    const { data, response } = await client()
      .chat.completions.create({ model: 'Qwen2.5-7B', messages: [{ role: 'user', content: 'hello' }] })
      .withResponse();
    expect(data.choices[0].message.content).toBe('Paged engine says hello');
    expect(data.choices[0].finish_reason).toBe('stop');
    expect(response.headers.get('x-gw-endpoint')).toBe('paged1');
    expect(response.headers.get('x-gw-model')).toBe('Qwen2.5-7B');
    expect(paged1.traffic.at(-1)!.headers.authorization).toBe('Bearer sk-test');
  });

  it('streams a chat completion', async () => {
    const stream = await client().chat.completions.create({ model: 'Qwen2.5-7B', messages: [{ role: 'user', content: 'hello' }], stream: true });
    let text = '';
    let finish: string | null = null;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta?.content ?? '';
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    expect(text).toBe('Paged engine says hello');
    expect(finish).toBe('stop');
  });

  it('calls tools, plain and streamed', async () => {
    const res = await client().chat.completions.create({ model: 'Qwen2.5-7B', messages: [{ role: 'user', content: 'weather?' }], tools });
    expect(res.choices[0].finish_reason).toBe('tool_calls');
    expect(res.choices[0].message.tool_calls?.[0]).toMatchObject({ type: 'function', function: weather });
    const stream = client().chat.completions.stream({ model: 'Qwen2.5-7B', messages: [{ role: 'user', content: 'weather?' }], tools });
    const done = await stream.finalChatCompletion();
    expect(done.choices[0].message.tool_calls?.[0]).toMatchObject({ function: weather });
  });
});

describe('embeddings', () => {
  it('creates embeddings for a batch', async () => {
    const res = await client().embeddings.create({ model: 'bge-small', input: ['one', 'two'] });
    expect(res.data).toHaveLength(2);
    expect(res.data[1].index).toBe(1);
    expect(res.data[0].embedding.length).toBe(8);
  });
});

describe('the Responses API', () => {
  it('creates a response', async () => {
    const res = await client().responses.create({ model: 'Llama-3.1-8B', input: 'hello' });
    expect(res.output_text).toBe('The other one');
    expect(res.status).toBe('completed');
    expect(res.usage?.output_tokens).toBeGreaterThan(0);
    expect(paged2.traffic.at(-1)!.url).toBe('/v1/responses');
  });

  it('streams a response, event by event', async () => {
    const stream = await client().responses.create({ model: 'Llama-3.1-8B', input: 'hello', stream: true });
    const types: string[] = [];
    let text = '';
    for await (const event of stream) {
      types.push(event.type);
      if (event.type === 'response.output_text.delta') text += event.delta;
    }
    expect(text).toBe('The other one');
    expect(types[0]).toBe('response.created');
    expect(types.at(-1)).toBe('response.completed');
  });

  it('returns function calls, and the stream helper assembles them', async () => {
    const fnTools = [
      { type: 'function' as const, name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } }, strict: false },
    ];
    const res = await client().responses.create({ model: 'Qwen2.5-7B', input: 'weather?', tools: fnTools });
    expect(res.output.find((o) => o.type === 'function_call')).toMatchObject({ name: 'get_weather', arguments: weather.arguments });
    const final = await client().responses.stream({ model: 'Qwen2.5-7B', input: 'weather?', tools: fnTools }).finalResponse();
    expect(final.output_text).toBe('Paged engine says hello');
    expect(final.output.find((o) => o.type === 'function_call')).toMatchObject({ name: 'get_weather', arguments: weather.arguments });
  });
});

describe('models', () => {
  it('lists the models of both endpoints on every call', async () => {
    for (let i = 0; i < 3; i++) {
      const page = await client().models.list();
      expect(page.data.map((m) => m.id)).toEqual(['Qwen2.5-7B', 'bge-small', 'Llama-3.1-8B', 'Qwen/Qwen3-4B']);
    }
  });

  it("retrieves one model with the family's fields, and 404s an unknown one", async () => {
    const model = await client().models.retrieve('Llama-3.1-8B');
    expect(model).toMatchObject({ id: 'Llama-3.1-8B', object: 'model', owned_by: 'pagedengine', max_model_len: 131072 });
    await expect(client().models.retrieve('gpt-9')).rejects.toBeInstanceOf(OpenAI.NotFoundError);
  });

  it('retrieves a model whose id has a slash (the package sends it as %2F)', async () => {
    expect(await client().models.retrieve('Qwen/Qwen3-4B')).toMatchObject({ id: 'Qwen/Qwen3-4B', max_model_len: 40960 });
    await expect(client().models.retrieve('Qwen/../../etc')).rejects.toBeInstanceOf(OpenAI.BadRequestError);
  });
});
