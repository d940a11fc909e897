// Continuation in each API's own terms, read by each API's official client: the messages API
// (its own prefill, passthrough; and translated, where the continuation is a chat one the
// translation reads on), Ollama's NDJSON api/chat and api/generate, llama.cpp's native
// completion. Each time: one complete answer, the first backend's words then the second's.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import Anthropic from '@anthropic-ai/sdk';
import { Ollama } from 'ollama';
import { FakeBackend } from '../../../engine/demo/index.js';
import { closeAll, endpoint, startGateway, type Started } from '../../helpers/gateway.js';
import { rawRequest } from '../../helpers/http.js';

const REPLY = 'The quick brown fox jumps over the lazy dog while the cat watches from the warm windowsill';
const FIVE_WORDS = 'The quick brown fox jumps';
let gw: Started;
const fakes: Record<string, FakeBackend> = {};
const pair = async (family: string, model: string) => {
  for (const side of ['a', 'b'])
    fakes[`${family}-${side}`] = await new FakeBackend({ family, name: `${family}-${side}`, models: [{ name: model }], reply: REPLY }).start();
};
const fake = (name: string) => fakes[name];
const sent = (name: string, path: string) =>
  fake(name)
    .received.filter((x) => x.url === path)
    .map((x) => x.json);

beforeAll(async () => {
  await pair('cppengine', 'llama-3.2-3b');
  await pair('radixengine', 'qwen2.5-7b');
  await pair('localrunner', 'llama3.1:8b');
  // The first of each pair goes silent for 2 s before it counts as stalled (far above any gap of a healthy stream under load).
  const eps = Object.values(fakes).map((f) =>
    endpoint(f.name, f.family, f.url, {
      priority: f.name.endsWith('-a') ? 100 : 50,
      check_interval: '60s',
      ...(f.name.endsWith('-a') ? { stream_idle_timeout: '2s' } : {}),
    }),
  );
  gw = await startGateway({ proxy: { circuit_breaker: { proxy_failures: 1000 } }, discovery: { static: { endpoints: eps } } });
});
afterAll(() => closeAll(gw, Object.values(fakes)));
beforeEach(() => Object.values(fakes).forEach((f) => f.reset()));

const anthropic = () => new Anthropic({ baseURL: `${gw.url}/gw/msgapi`, apiKey: 'sk-ant-test', maxRetries: 0 });
async function messagesText(model: string): Promise<Anthropic.Message> {
  const stream = anthropic().messages.stream({ model, max_tokens: 200, messages: [{ role: 'user', content: 'tell me about the fox' }] });
  return stream.finalMessage();
}

describe('the messages API', () => {
  it("passthrough: the API's own prefill, joined to the open text block", async () => {
    fake('cppengine-a').behaviour.resetAfterChunks = 7; // message_start, the block's start, five words
    const m = await messagesText('llama-3.2-3b');
    expect(m.content).toEqual([{ type: 'text', text: REPLY, citations: null }].map(({ citations: _c, ...b }) => expect.objectContaining(b)));
    expect(m.content).toHaveLength(1);
    expect(m.stop_reason).toBe('end_turn');
    const [body] = sent('cppengine-b', '/v1/messages');
    expect(body.messages.at(-1)).toEqual({ role: 'assistant', content: FIVE_WORDS });
    expect(body.max_tokens).toBe(195);
  });

  it('translated: a chat continuation, read on by the same translation', async () => {
    fake('radixengine-a').behaviour.resetAfterChunks = 6;
    const m = await messagesText('qwen2.5-7b');
    expect(m.content).toHaveLength(1);
    expect((m.content[0] as Anthropic.TextBlock).text).toBe(REPLY);
    expect(m.stop_reason).toBe('end_turn');
    const [body] = sent('radixengine-b', '/v1/chat/completions');
    expect(body.messages.at(-1)).toEqual({ role: 'assistant', content: FIVE_WORDS });
    expect(body.continue_final_message).toBe(true);
  });
});

describe("llama.cpp's chat route", () => {
  it('repeats the prefill at the start of its answer: the repeat is dropped', async () => {
    fake('cppengine-a').behaviour.resetAfterChunks = 6;
    const res = await rawRequest(`${gw.url}/gw/cppengine/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'llama-3.2-3b', messages: [{ role: 'user', content: 'hi' }], stream: true }),
    });
    const text = res.body
      .split('\n\n')
      .filter((e) => e.startsWith('data: {'))
      .map((e) => JSON.parse(e.slice(6)).choices[0]?.delta?.content ?? '')
      .join('');
    expect(text).toBe(REPLY);
    const [body] = sent('cppengine-b', '/v1/chat/completions');
    expect(body.messages.at(-1)).toEqual({ role: 'assistant', content: FIVE_WORDS });
    expect(body.chat_template_kwargs).toEqual({ enable_thinking: false });
  });

  it("the client's own prefill, repeated by the engine: neither sent twice nor shown twice", async () => {
    fake('cppengine-a').behaviour.resetAfterChunks = 4; // the role chunk, "The quick" repeated + " brown", " fox", " jumps"
    const messages = [
      { role: 'user', content: 'hi' },
      { role: 'assistant', content: 'The quick' },
    ];
    const res = await rawRequest(`${gw.url}/gw/cppengine/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'llama-3.2-3b', messages, stream: true }),
    });
    const text = res.body
      .split('\n\n')
      .filter((e) => e.startsWith('data: {'))
      .map((e) => JSON.parse(e.slice(6)).choices[0]?.delta?.content ?? '')
      .join('');
    expect(text).toBe(REPLY);
    const [body] = sent('cppengine-b', '/v1/chat/completions');
    expect(body.messages.at(-1)).toEqual({ role: 'assistant', content: FIVE_WORDS });
  });
});

describe("Ollama's native routes (NDJSON)", () => {
  const ollama = () => new Ollama({ host: `${gw.url}/gw/localrunner` });

  it('api/chat: a trailing assistant message', async () => {
    fake('localrunner-a').behaviour.resetAfterChunks = 5;
    let text = '';
    let done = false;
    for await (const part of await ollama().chat({ model: 'llama3.1:8b', messages: [{ role: 'user', content: 'tell me' }], stream: true })) {
      text += part.message.content;
      done ||= part.done;
    }
    expect(text).toBe(REPLY);
    expect(done).toBe(true);
    expect(sent('localrunner-b', '/api/chat')[0].messages.at(-1)).toEqual({ role: 'assistant', content: FIVE_WORDS });
  });

  it('api/generate, templated: continued through api/chat, read back as api/generate lines', async () => {
    fake('localrunner-a').behaviour.resetAfterChunks = 5;
    let text = '';
    let done = false;
    for await (const part of await ollama().generate({
      model: 'llama3.1:8b',
      prompt: 'Tell me a story',
      system: 'Be brief',
      stream: true,
      options: { num_predict: 40 },
    })) {
      text += part.response;
      done ||= part.done;
    }
    expect(text).toBe(REPLY);
    expect(done).toBe(true);
    const [body] = sent('localrunner-b', '/api/chat');
    expect(body.messages).toEqual([
      { role: 'system', content: 'Be brief' },
      { role: 'user', content: 'Tell me a story' },
      { role: 'assistant', content: FIVE_WORDS },
    ]);
    expect(body.options.num_predict).toBe(35);
  });

  it('api/generate, raw: the prompt followed by the text', async () => {
    fake('localrunner-a').behaviour.resetAfterChunks = 5;
    let text = '';
    for await (const part of await ollama().generate({ model: 'llama3.1:8b', prompt: '<s>Story: ', raw: true, stream: true })) text += part.response;
    expect(text).toBe(REPLY);
    expect(sent('localrunner-b', '/api/generate')[0].prompt).toBe(`<s>Story: ${FIVE_WORDS}`);
  });
});

describe("llama.cpp's native completion", () => {
  it('the prompt followed by the text, n_predict reduced', async () => {
    fake('cppengine-a').behaviour.resetAfterChunks = 5;
    const r = await rawRequest(`${gw.url}/gw/cppengine/completion`, {
      method: 'POST',
      body: JSON.stringify({ prompt: 'Once upon a time,', n_predict: 64, stream: true }),
      headers: { 'content-type': 'application/json' },
    });
    const events = r.body
      .split('\n\n')
      .filter((e) => e.startsWith('data: '))
      .map((e) => JSON.parse(e.slice(6)));
    expect(events.map((e) => e.content).join('')).toBe(REPLY);
    expect(events.at(-1).stop).toBe(true);
    expect(events.filter((e) => e.stop === true)).toHaveLength(1);
    const [body] = sent('cppengine-b', '/completion');
    expect(body.prompt).toBe(`Once upon a time,${FIVE_WORDS}`);
    expect(body.n_predict).toBe(59);
  });
});

// Every API, every way a stream breaks after its first words: the client's official reader gets
// the whole answer, and the second backend was asked to continue the five words the client had.
const SSE_BAD = { malformed: 'data: {"oops": \n\n', error: 'data: {"error": {"message": "CUDA out of memory", "type": "server_error"}}\n\n' };
const NDJSON_BAD = { malformed: '{"oops": \n', error: '{"error": "CUDA out of memory"}\n' };
const MSGAPI_BAD = {
  malformed: SSE_BAD.malformed,
  error: 'event: error\ndata: {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}\n\n',
};
const ollama = () => new Ollama({ host: `${gw.url}/gw/localrunner` });
const APIS = [
  {
    api: 'messages API, passthrough',
    fake: 'cppengine',
    at: 7,
    bad: MSGAPI_BAD,
    path: '/v1/messages',
    read: async () => ((await messagesText('llama-3.2-3b')).content[0] as Anthropic.TextBlock).text,
    prefill: (body: any) => body.messages.at(-1).content,
  },
  {
    api: 'messages API, translated',
    fake: 'radixengine',
    at: 6,
    bad: SSE_BAD,
    path: '/v1/chat/completions',
    read: async () => ((await messagesText('qwen2.5-7b')).content[0] as Anthropic.TextBlock).text,
    prefill: (body: any) => body.messages.at(-1).content,
  },
  {
    api: 'Ollama api/chat',
    fake: 'localrunner',
    at: 5,
    bad: NDJSON_BAD,
    path: '/api/chat',
    read: async () => {
      let text = '';
      for await (const part of await ollama().chat({ model: 'llama3.1:8b', messages: [{ role: 'user', content: 'tell me' }], stream: true }))
        text += part.message.content;
      return text;
    },
    prefill: (body: any) => body.messages.at(-1).content,
  },
  {
    api: 'Ollama api/generate',
    fake: 'localrunner',
    at: 5,
    bad: NDJSON_BAD,
    path: '/api/chat',
    read: async () => {
      let text = '';
      for await (const part of await ollama().generate({ model: 'llama3.1:8b', prompt: 'Tell me a story', stream: true })) text += part.response;
      return text;
    },
    prefill: (body: any) => body.messages.at(-1).content,
  },
  {
    api: 'llama.cpp completion',
    fake: 'cppengine',
    at: 5,
    bad: SSE_BAD,
    path: '/completion',
    read: async () => {
      const r = await rawRequest(`${gw.url}/gw/cppengine/completion`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ prompt: 'Story: ', stream: true }),
      });
      const events = r.body
        .split('\n\n')
        .filter((e) => e.startsWith('data: '))
        .map((e) => JSON.parse(e.slice(6)));
      if (events.at(-1)?.stop !== true) throw new Error(`no final event: ${r.body.slice(-200)}`);
      return events.map((e) => e.content).join('');
    },
    prefill: (body: any) => body.prompt.slice('Story: '.length),
  },
];
const BREAKS = ['reset', 'stall', 'malformed', 'error'] as const;

describe.each(APIS)('$api', (t) => {
  it.each(BREAKS)('a %s after five words: one complete answer', async (kind) => {
    const first = fake(`${t.fake}-a`).behaviour;
    if (kind === 'reset') first.resetAfterChunks = t.at;
    else if (kind === 'stall') first.stallAfterChunks = t.at;
    else first.breakWith = { at: t.at, text: t.bad[kind] };
    expect(await t.read()).toBe(REPLY);
    const asked = sent(`${t.fake}-b`, t.path);
    expect(asked).toHaveLength(1);
    expect(t.prefill(asked[0])).toBe(FIVE_WORDS);
  });
});
