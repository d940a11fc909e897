// The official clients, unmodified and given only a key, the way each ecosystem sends one: the
// openai package (Authorization: Bearer — also how Codex sends OPENAI_API_KEY), the Anthropic
// package (x-api-key from apiKey, as Claude Code sends ANTHROPIC_API_KEY; Bearer from authToken, as
// it sends ANTHROPIC_AUTH_TOKEN), the ollama package (its headers option) and the Vercel AI SDK.
// A wrong key surfaces as each client's own authentication error.
import Anthropic from '@anthropic-ai/sdk';
import { createOpenAI } from '@ai-sdk/openai';
import { generateText } from 'ai';
import { Ollama } from 'ollama';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keyHash } from '../../../engine/core/keys.js';
import { FakeBackend } from '../../../engine/demo/index.js';
import { closeAll, endpoint, startGateway, type Started } from '../../helpers/gateway.js';

const KEY = 'gw-client-key-0001';
let paged: FakeBackend, local: FakeBackend, gw: Started;

beforeAll(async () => {
  paged = await new FakeBackend({ family: 'pagedengine', name: 'paged', reply: 'Paged says hi', models: [{ name: 'qwen' }] }).start();
  local = await new FakeBackend({ family: 'localrunner', name: 'local', reply: 'Local says hi', models: [{ name: 'llama3.1:8b' }] }).start();
  gw = await startGateway({
    auth: { keys: [{ name: 'dev', hash: keyHash(KEY), models: ['qwen', 'llama3.1:8b'] }], admin: ['dev'] },
    discovery: { static: { endpoints: [endpoint('paged', 'pagedengine', paged.url), endpoint('local', 'localrunner', local.url)] } },
  });
});
afterAll(() => closeAll(gw, [paged, local]));

describe('clients given only a key', () => {
  it('openai: chat and the model list; a wrong key is its AuthenticationError', async () => {
    const client = new OpenAI({ baseURL: `${gw.url}/gw/openai/v1`, apiKey: KEY, maxRetries: 0 });
    const reply = await client.chat.completions.create({ model: 'qwen', messages: [{ role: 'user', content: 'hi' }] });
    expect(reply.choices[0].message.content).toBe('Paged says hi');
    expect((await client.models.list()).data.map((m) => m.id).sort()).toEqual(['llama3.1:8b', 'qwen']);
    const wrong = new OpenAI({ baseURL: `${gw.url}/gw/openai/v1`, apiKey: 'sk-wrong', maxRetries: 0 });
    await expect(wrong.models.list()).rejects.toBeInstanceOf(OpenAI.AuthenticationError);
  });

  it('Anthropic: apiKey (x-api-key) and authToken (Bearer); a wrong key is its AuthenticationError', async () => {
    for (const auth of [{ apiKey: KEY }, { apiKey: null, authToken: KEY }]) {
      const client = new Anthropic({ baseURL: `${gw.url}/gw/msgapi`, maxRetries: 0, ...auth });
      const msg = await client.messages.create({ model: 'qwen', max_tokens: 16, messages: [{ role: 'user', content: 'hi' }] });
      expect(msg.content[0]).toMatchObject({ type: 'text', text: 'Paged says hi' });
    }
    const wrong = new Anthropic({ baseURL: `${gw.url}/gw/msgapi`, apiKey: 'sk-ant-wrong', maxRetries: 0 });
    await expect(wrong.messages.create({ model: 'qwen', max_tokens: 16, messages: [{ role: 'user', content: 'hi' }] })).rejects.toBeInstanceOf(
      Anthropic.AuthenticationError,
    );
  });

  it('ollama: its headers option carries the key; without it the error is its own', async () => {
    const client = new Ollama({ host: `${gw.url}/gw/localrunner`, headers: { Authorization: `Bearer ${KEY}` } });
    const reply = await client.chat({ model: 'llama3.1:8b', messages: [{ role: 'user', content: 'hi' }] });
    expect(reply.message.content).toBe('Local says hi');
    expect((await client.list()).models.map((m) => m.name)).toEqual(['llama3.1:8b']);
    await expect(new Ollama({ host: `${gw.url}/gw/localrunner` }).list()).rejects.toThrow('an API key is required');
  });

  it('the Vercel AI SDK: the OpenAI provider given the key', async () => {
    const openai = createOpenAI({ baseURL: `${gw.url}/gw/openai/v1`, apiKey: KEY });
    const { text } = await generateText({ model: openai.chat('qwen'), prompt: 'hi' });
    expect(text).toBe('Paged says hi');
  });
});
