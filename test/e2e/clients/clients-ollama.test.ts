// The official ollama package pointed at the gateway, the way users do it, in front of two
// endpoints of the family with different models: version, chat, embeddings (embed and the older
// embeddings), and list / ps that give the whole family on every call.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Ollama } from 'ollama';
import { FakeBackend } from '../../../engine/demo/index.js';
import { closeAll, endpoint, startGateway, type Started } from '../../helpers/gateway.js';

let local1: FakeBackend, local2: FakeBackend, gw: Started;

beforeAll(async () => {
  local1 = await new FakeBackend({
    family: 'localrunner',
    name: 'local1',
    reply: 'Hi there from the local runner',
    models: [
      { name: 'llama3.1:8b', digest: 'sha256:aa' },
      { name: 'nomic-embed-text', digest: 'sha256:nn' },
    ],
  }).start();
  local2 = await new FakeBackend({
    family: 'localrunner',
    name: 'local2',
    reply: 'Hi there from the other runner',
    models: [
      { name: 'qwen2.5:7b', digest: 'sha256:qq' },
      { name: 'all-minilm', digest: 'sha256:mm' },
    ],
  }).start();
  gw = await startGateway({
    discovery: { static: { endpoints: [endpoint('local1', 'localrunner', local1.url), endpoint('local2', 'localrunner', local2.url)] } },
  });
});
afterAll(() => closeAll(gw, [local1, local2]));

const client = () => new Ollama({ host: `${gw.url}/gw/localrunner` });

describe('ollama client', () => {
  it('reads the version (what "verify connection" does)', async () => {
    expect(await client().version()).toEqual({ version: '0.12.6' });
  });

  it('chats without streaming', async () => {
    const res = await client().chat({ model: 'llama3.1:8b', messages: [{ role: 'user', content: 'hello' }], stream: false });
    expect(res.message.content).toBe('Hi there from the local runner');
    expect(res.done).toBe(true);
  });

  it('streams a chat', async () => {
    const stream = await client().chat({ model: 'qwen2.5:7b', messages: [{ role: 'user', content: 'hello' }], stream: true });
    let text = '';
    let parts = 0;
    for await (const part of stream) {
      text += part.message.content;
      parts++;
    }
    expect(text).toBe('Hi there from the other runner');
    expect(parts).toBe(7);
  });

  it('embeds one input and a batch with embed()', async () => {
    const one = await client().embed({ model: 'nomic-embed-text', input: 'hello' });
    expect(one.embeddings).toHaveLength(1);
    expect(one.embeddings[0]).toHaveLength(8);
    const batch = await client().embed({ model: 'all-minilm', input: ['one', 'two', 'three'] });
    expect(batch).toMatchObject({ model: 'all-minilm', prompt_eval_count: 9 });
    expect(batch.embeddings).toHaveLength(3);
    expect(local2.traffic.at(-1)!.url).toBe('/api/embed');
  });

  it('creates embeddings with the older embeddings()', async () => {
    const res = await client().embeddings({ model: 'nomic-embed-text', prompt: 'hello' });
    expect(res.embedding).toHaveLength(8);
    expect(local1.traffic.at(-1)!.url).toBe('/api/embeddings');
  });

  it('lists the models of both endpoints on every call', async () => {
    for (let i = 0; i < 4; i++) {
      const res = await client().list();
      expect(res.models.map((m) => m.name)).toEqual(['llama3.1:8b', 'nomic-embed-text', 'qwen2.5:7b', 'all-minilm']);
    }
    expect((await client().list()).models[2]).toMatchObject({ model: 'qwen2.5:7b', digest: 'qq', details: { format: 'gguf' } });
  });

  it('shows the running models of both endpoints with ps()', async () => {
    const res = await client().ps();
    expect(res.models.map((m) => m.name)).toEqual(['llama3.1:8b', 'qwen2.5:7b']);
    expect(Number.isNaN(Date.parse(String(res.models[0].expires_at)))).toBe(false);
  });
});
