// The official client libraries pointed at the gateway, the way users do it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import { Ollama } from 'ollama';
import { FakeBackend } from '../../engine/demo/index.js';
import { endpoint, startGateway, type Started } from '../helpers/gateway.js';

let local: FakeBackend, paged: FakeBackend, gw: Started;
beforeAll(async () => {
  local = await new FakeBackend({ family: 'localrunner', reply: 'Hi there from the local runner', models: [{ name: 'llama3.1:8b', digest: 'sha256:aa' }, { name: 'nomic-embed-text' }] }).start();
  paged = await new FakeBackend({ family: 'pagedengine', reply: 'Paged engine says hello', models: [{ name: 'Qwen2.5-7B' }, { name: 'bge-small' }] }).start();
  gw = await startGateway({ discovery: { static: { endpoints: [endpoint('local', 'localrunner', local.url), endpoint('paged', 'pagedengine', paged.url)] } } });
});
afterAll(async () => {
  await gw.close();
  await local.stop();
  await paged.stop();
});

describe('openai client', () => {
  const client = () => new OpenAI({ baseURL: `${gw.url}/gw/pagedengine/v1`, apiKey: 'sk-test', maxRetries: 0 });

  it('creates a chat completion', async () => {
    const { data, response } = await client().chat.completions.create({ model: 'Qwen2.5-7B', messages: [{ role: 'user', content: 'hello' }] }).withResponse();
    expect(data.choices[0].message.content).toBe('Paged engine says hello');
    expect(data.choices[0].finish_reason).toBe('stop');
    expect(response.headers.get('x-gw-endpoint')).toBe('paged');
    expect(response.headers.get('x-gw-model')).toBe('Qwen2.5-7B');
    expect(paged.traffic.at(-1)!.headers.authorization).toBe('Bearer sk-test');
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

  it('creates embeddings', async () => {
    const res = await client().embeddings.create({ model: 'bge-small', input: ['one', 'two'] });
    expect(res.data).toHaveLength(2);
    expect(res.data[1].index).toBe(1);
    expect(res.data[0].embedding.length).toBe(8);
  });
});

describe('ollama client', () => {
  const client = () => new Ollama({ host: `${gw.url}/gw/localrunner` });

  it('chats without streaming', async () => {
    const res = await client().chat({ model: 'llama3.1:8b', messages: [{ role: 'user', content: 'hello' }], stream: false });
    expect(res.message.content).toBe('Hi there from the local runner');
    expect(res.done).toBe(true);
  });

  it('streams a chat', async () => {
    const stream = await client().chat({ model: 'llama3.1:8b', messages: [{ role: 'user', content: 'hello' }], stream: true });
    let text = '';
    let parts = 0;
    for await (const part of stream) {
      text += part.message.content;
      parts++;
    }
    expect(text).toBe('Hi there from the local runner');
    expect(parts).toBe(7);
  });

  it('creates embeddings', async () => {
    const res = await client().embeddings({ model: 'nomic-embed-text', prompt: 'hello' });
    expect(res.embedding).toHaveLength(8);
    expect(local.traffic.at(-1)!.url).toBe('/api/embeddings');
  });

  it('lists models', async () => {
    const res = await client().list();
    expect(res.models[0].name).toBe('llama3.1:8b');
  });
});
