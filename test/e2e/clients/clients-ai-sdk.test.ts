// The Vercel AI SDK (ai) pointed at the gateway: the OpenAI provider's default model (the
// Responses API) and its chat model, and the community Ollama provider (chat and embed).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { embed, generateText, jsonSchema, streamText, tool } from 'ai';
import { createOpenAI } from '@ai-sdk/openai';
import { createOllama } from 'ollama-ai-provider-v2';
import { FakeBackend } from '../../../engine/demo/index.js';
import { closeAll, endpoint, startGateway, type Started } from '../../helpers/gateway.js';

let paged: FakeBackend, local: FakeBackend, gw: Started;

beforeAll(async () => {
  paged = await new FakeBackend({
    family: 'pagedengine',
    name: 'paged',
    reply: 'Paged engine says hello',
    toolCalls: [{ name: 'get_weather', arguments: '{"city":"Paris"}' }],
    models: [{ name: 'Qwen2.5-7B' }],
  }).start();
  local = await new FakeBackend({
    family: 'localrunner',
    name: 'local',
    reply: 'Hi from the local runner',
    models: [{ name: 'llama3.1:8b' }, { name: 'nomic-embed-text' }],
  }).start();
  gw = await startGateway({ discovery: { static: { endpoints: [endpoint('paged', 'pagedengine', paged.url), endpoint('local', 'localrunner', local.url)] } } });
});
afterAll(() => closeAll(gw, [paged, local]));

const collect = async (stream: AsyncIterable<string>) => {
  let text = '';
  for await (const part of stream) text += part;
  return text;
};

describe('@ai-sdk/openai', () => {
  const openai = () => createOpenAI({ baseURL: `${gw.url}/gw/pagedengine/v1`, apiKey: 'sk-test' });

  it('openai(model) generates and streams text through the Responses API', async () => {
    const { text, usage } = await generateText({ model: openai()('Qwen2.5-7B'), prompt: 'hello' });
    expect(text).toBe('Paged engine says hello');
    expect(usage.outputTokens).toBeGreaterThan(0);
    expect(paged.traffic.at(-1)!.url).toBe('/v1/responses');
    const result = streamText({ model: openai()('Qwen2.5-7B'), prompt: 'hello' });
    expect(await collect(result.textStream)).toBe('Paged engine says hello');
    expect(await result.finishReason).toBe('stop');
    expect(paged.traffic.at(-1)!.json.stream).toBe(true);
  });

  it('openai(model) returns tool calls', async () => {
    const weather = tool({
      description: 'the weather',
      inputSchema: jsonSchema<{ city: string }>({ type: 'object', properties: { city: { type: 'string' } }, required: ['city'] }),
    });
    const { toolCalls } = await generateText({ model: openai()('Qwen2.5-7B'), prompt: 'weather?', tools: { get_weather: weather } });
    expect(toolCalls[0]).toMatchObject({ toolName: 'get_weather', input: { city: 'Paris' } });
  });

  it('openai.chat(model) generates and streams through chat completions', async () => {
    const { text } = await generateText({ model: openai().chat('Qwen2.5-7B'), prompt: 'hello' });
    expect(text).toBe('Paged engine says hello');
    expect(paged.traffic.at(-1)!.url).toBe('/v1/chat/completions');
    const result = streamText({ model: openai().chat('Qwen2.5-7B'), prompt: 'hello' });
    expect(await collect(result.textStream)).toBe('Paged engine says hello');
  });
});

describe('ollama-ai-provider-v2', () => {
  const ollama = () => createOllama({ baseURL: `${gw.url}/gw/localrunner/api` });

  it('generates and streams text', async () => {
    const { text } = await generateText({ model: ollama()('llama3.1:8b'), prompt: 'hello' });
    expect(text).toBe('Hi from the local runner');
    const result = streamText({ model: ollama()('llama3.1:8b'), prompt: 'hello' });
    expect(await collect(result.textStream)).toBe('Hi from the local runner');
    expect(local.traffic.at(-1)!.url).toBe('/api/chat');
  });

  it('embeds through api/embed', async () => {
    const { embedding } = await embed({ model: ollama().embedding('nomic-embed-text'), value: 'hello' });
    expect(embedding).toHaveLength(8);
    expect(local.traffic.at(-1)!.url).toBe('/api/embed');
  });
});
