// A stream that breaks after its first words is finished by another backend: the client's SDK
// reads one complete answer, the first backend's words followed by the second's, and the second
// backend was asked to continue exactly what the client had. Where nothing may continue it (a
// tool call under way, a refused prefill, continuation switched off), the stream ends with the
// honest in-stream error, as before.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import { request } from 'undici';
import { FakeBackend } from '../../../engine/demo/index.js';
import { closeAll, endpoint, startGateway, type Started } from '../../helpers/gateway.js';
import { rawRequest } from '../../helpers/http.js';
import { waitFor } from '../../helpers/wait.js';

const REPLY = 'The quick brown fox jumps over the lazy dog while the cat watches from the warm windowsill';
const FIVE_WORDS = 'The quick brown fox jumps';
const MODEL = 'Qwen2.5-7B';
const FALLBACK = 'Llama-3.1-8B';

let a: FakeBackend, b: FakeBackend, fb: FakeBackend, gw: Started;
const fakes = () => [a, b, fb];

beforeAll(async () => {
  a = await new FakeBackend({ family: 'pagedengine', name: 'paged-a', models: [{ name: MODEL }], reply: REPLY }).start();
  b = await new FakeBackend({ family: 'pagedengine', name: 'paged-b', models: [{ name: MODEL }], reply: REPLY }).start();
  fb = await new FakeBackend({ family: 'pagedengine', name: 'paged-fallback', models: [{ name: FALLBACK }], reply: REPLY }).start();
  const ep = (f: FakeBackend, priority: number, extra = {}) => endpoint(f.name, 'pagedengine', f.url, { priority, check_interval: '60s', ...extra });
  gw = await startGateway({
    // Every test breaks paged-a's streams: its breaker must not open on them.
    proxy: { circuit_breaker: { proxy_failures: 1000 } },
    model_fallbacks: { [MODEL]: [FALLBACK] },
    discovery: { static: { endpoints: [ep(a, 100, { stream_idle_timeout: '2s' }), ep(b, 50), ep(fb, 10)] } },
  });
});
afterAll(() => closeAll(gw, fakes()));
beforeEach(() => {
  fakes().forEach((f) => f.reset());
  // What the gateway learnt of an engine (a refused prefill) is each test's own.
  for (const ep of gw.gw.runtime.endpoints.all) ep.prefillRefused.clear();
});

const openai = () => new OpenAI({ baseURL: `${gw.url}/gw/pagedengine/v1`, apiKey: 'unused', maxRetries: 0 });
const ask = (extra: Partial<OpenAI.ChatCompletionCreateParamsStreaming> = {}) =>
  openai().chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'tell me about the fox' }], stream: true, max_tokens: 100, ...extra });

async function streamText(extra: Partial<OpenAI.ChatCompletionCreateParamsStreaming> = {}) {
  let text = '';
  let finish: string | null | undefined;
  let usage: any;
  const ids = new Set<string>();
  for await (const chunk of await ask(extra)) {
    ids.add(chunk.id);
    text += chunk.choices[0]?.delta?.content ?? '';
    finish = chunk.choices[0]?.finish_reason ?? finish;
    usage = chunk.usage ?? usage;
  }
  return { text, finish, ids, usage };
}

const chatSent = (f: FakeBackend) => f.received.filter((x) => x.url === '/v1/chat/completions').map((x) => x.json);
const accessLog = () => gw.logs.filter((l) => l.msg === 'request' && String(l.path).endsWith('/completions')).at(-1)!;

describe('chat completions: a stream broken after its first words is finished by the next endpoint', () => {
  it("a reset: one answer under one id; the prefill sent exactly, with vLLM's fields, the token limit reduced", async () => {
    a.behaviour.resetAfterChunks = 6; // the role chunk and five words
    const r = await streamText();
    expect(r.text).toBe(REPLY);
    expect(r.finish).toBe('stop');
    expect([...r.ids]).toEqual(['chatcmpl-paged-a-1']);
    const [sent] = chatSent(b);
    expect(sent.messages).toEqual([
      { role: 'user', content: 'tell me about the fox' },
      { role: 'assistant', content: FIVE_WORDS },
    ]);
    expect(sent.continue_final_message).toBe(true);
    expect(sent.add_generation_prompt).toBe(false);
    expect(sent.max_tokens).toBe(95);
    const log = accessLog();
    expect(log.endpoint).toBe('paged-b');
    expect(log.tried).toEqual([
      expect.objectContaining({ endpoint: 'paged-a', outcome: expect.stringMatching(/^stream_broken_midway \(broke off the reply/) }),
    ]);
    expect(log.continuation).toBe('continued');
  });

  it("a stall past the endpoint's stream_idle_timeout", async () => {
    a.behaviour.stallAfterChunks = 6;
    const r = await streamText();
    expect(r.text).toBe(REPLY);
    expect(chatSent(b)[0].messages.at(-1).content).toBe(FIVE_WORDS);
  });

  it('a malformed event, and an error event: the client never sees either', async () => {
    for (const text of ['data: {"choices": [oops\n\n', 'data: {"error": {"message": "CUDA out of memory", "type": "server_error"}}\n\n']) {
      b.reset();
      a.behaviour.breakWith = { at: 6, text };
      const r = await streamText();
      expect(r.text).toBe(REPLY);
      expect(chatSent(b)).toHaveLength(1);
    }
  });

  it('an end without [DONE] or a finish reason', async () => {
    a.behaviour.breakWith = { at: 6, text: '' };
    expect((await streamText()).text).toBe(REPLY);
  });

  it("a break after the answer's end ([DONE] reached the client) is not continued", async () => {
    a.behaviour.breakWith = { at: 19, text: 'data: [DONE]\n\n', reset: true }; // the role chunk, 17 words, the finish
    const r = await streamText();
    expect(r.text).toBe(REPLY);
    expect(r.finish).toBe('stop');
    expect(chatSent(b)).toHaveLength(0);
  });

  it('constrained output (a JSON schema) is never continued: the grammar would open a new value', async () => {
    a.behaviour.resetAfterChunks = 6;
    const response_format = { type: 'json_schema' as const, json_schema: { name: 'x', schema: { type: 'object' } } };
    await expect(streamText({ response_format })).rejects.toThrow(/paged-a broke off the reply/);
    expect(chatSent(b)).toHaveLength(0);
    expect(accessLog().continuation).toBe('not_continuable');
  });

  it("usage: the continuation's, marked partial since the broken part reported none", async () => {
    a.behaviour.resetAfterChunks = 6;
    const r = await streamText({ stream_options: { include_usage: true } });
    expect(r.text).toBe(REPLY);
    expect(r.usage).toMatchObject({ gw_partial: true });
    expect(r.usage.completion_tokens).toBeGreaterThan(0);
  });

  it('the trailing whitespace the client has is not sent, nor repeated', async () => {
    // The client has "The quick brown fox jumps over" + " " is impossible with word pieces; a
    // prefill of the client's own that ends in a space shows the same join.
    a.behaviour.resetAfterChunks = 3;
    const r = await streamText({ messages: [{ role: 'user', content: 'go on' }] });
    expect(r.text).toBe(REPLY);
    expect(chatSent(b)[0].messages.at(-1).content).toBe('The quick');
  });

  it('the fallback model finishes it when no endpoint of the model is left', async () => {
    a.behaviour.resetAfterChunks = 6;
    b.behaviour.status = 503;
    const r = await streamText();
    expect(r.text).toBe(REPLY);
    expect(chatSent(fb)[0].model).toBe(FALLBACK);
    expect(chatSent(fb)[0].messages.at(-1).content).toBe(FIVE_WORDS);
  });

  it("a break inside a tool call's arguments ends with the honest error; nobody is asked to continue", async () => {
    a.toolCalls = [{ name: 'get_weather', arguments: '{"city": "Paris", "unit": "celsius"}' }];
    try {
      a.behaviour.resetAfterChunks = 22; // 16 words, the call's head, some of its arguments
      const tools = [{ type: 'function' as const, function: { name: 'get_weather', parameters: { type: 'object' } } }];
      await expect(streamText({ tools })).rejects.toThrow(/paged-a broke off the reply/);
      expect(chatSent(b)).toHaveLength(0);
      expect(chatSent(fb)).toHaveLength(0);
      expect(accessLog().continuation).toBe('not_continuable');
    } finally {
      a.toolCalls = [];
    }
  });

  it('a refused prefill (400): remembered, and the answer asked for again there from its start; it repeats what the client has, so the rest joins', async () => {
    a.behaviour.resetAfterChunks = 6;
    b.behaviour.refusePrefill = true;
    const r = await streamText();
    expect([r.text, r.finish]).toEqual([REPLY, 'stop']);
    const [refused, restarted] = chatSent(b);
    expect(refused.messages.at(-1)).toEqual({ role: 'assistant', content: FIVE_WORDS });
    expect(restarted.messages).toEqual([{ role: 'user', content: 'tell me about the fox' }]);
    expect(chatSent(fb)).toHaveLength(0);
    expect(accessLog()).toMatchObject({ continuation: 'continued', endpoint: 'paged-b' });
    // The next break there goes straight to a restart: no prefill is offered it again.
    b.reset();
    a.behaviour.resetAfterChunks = 6;
    expect((await streamText()).text).toBe(REPLY);
    expect(chatSent(b).map((x) => x.messages.length)).toEqual([1]);
  });

  it('a restart that differs from what the client has ends with the honest error, and no other engine is asked', async () => {
    a.behaviour.resetAfterChunks = 6;
    b.behaviour.refusePrefill = true;
    b.reply = 'A different answer altogether, from another engine';
    try {
      await expect(streamText()).rejects.toThrow(/paged-a broke off the reply/);
    } finally {
      b.reply = REPLY;
    }
    expect(chatSent(b)).toHaveLength(2);
    expect(chatSent(fb)).toHaveLength(0);
    expect(accessLog()).toMatchObject({ continuation: 'failed', endpoint: 'paged-a' });
    expect(accessLog().tried.at(-1).outcome).toBe('restart differs from the answer so far');
  });

  it('a client that leaves while the continuation waits cancels it', async () => {
    a.behaviour.resetAfterChunks = 6;
    let release!: () => void;
    b.behaviour.holdUntil = new Promise<void>((r) => (release = r));
    const stream = await ask();
    const reading = (async () => {
      for await (const _ of stream);
    })();
    void reading.catch(() => undefined);
    await waitFor(() => chatSent(b).length === 1, 'the continuation to reach paged-b');
    stream.controller.abort();
    await waitFor(() => b.aborts === 1, 'paged-b to see its request cancelled');
    release();
  });

  it('says so: an SSE comment where it joins, the access log, the metrics', async () => {
    a.behaviour.resetAfterChunks = 6;
    const r = await rawRequest(`${gw.url}/gw/pagedengine/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'hi' }], stream: true }),
    });
    expect(r.body).toMatch(/\n\n: gw continued this answer on endpoint paged-b; the stream before broke: broke off the reply \(\w+\)\n\ndata: /);
    expect(r.body.trim().endsWith('data: [DONE]')).toBe(true);
    const metrics = await (await request(`${gw.url}/internal/metrics`)).body.text();
    expect(metrics).toMatch(/gw_stream_continuations_total\{family="pagedengine",route="[^"]+",outcome="continued"\} [1-9]/);
    expect(metrics).toMatch(/gw_failed_attempts_total\{[^}]*endpoint="paged-a"[^}]*reason="stream_broken_midway"\} [1-9]/);
  });

  it('a continuation that breaks in turn ends with the honest error (max: 1)', async () => {
    a.behaviour.resetAfterChunks = 6;
    b.behaviour.resetAfterChunks = 3; // its role chunk and two words
    let text = '';
    await expect(
      (async () => {
        for await (const c of await ask()) text += c.choices[0]?.delta?.content ?? '';
      })(),
    ).rejects.toThrow(/paged-b broke off the reply/);
    expect(text).toBe(`${FIVE_WORDS} over the`);
    expect(chatSent(fb)).toHaveLength(0);
    expect(accessLog().continuation).toBe('failed');
  });

  it('a first-token deadline applies to the continuation: a silent one gives way to the next', async () => {
    a.behaviour.resetAfterChunks = 6;
    let release!: () => void;
    b.behaviour.holdUntil = new Promise<void>((r) => (release = r));
    try {
      const client = new OpenAI({
        baseURL: `${gw.url}/gw/pagedengine/v1`,
        apiKey: 'unused',
        maxRetries: 0,
        defaultHeaders: { 'x-gw-first-token-timeout': '300ms' },
      });
      let text = '';
      for await (const c of await client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'hi' }], stream: true }))
        text += c.choices[0]?.delta?.content ?? '';
      expect(text).toBe(REPLY);
      expect(chatSent(fb)[0].messages.at(-1).content).toBe(FIVE_WORDS);
    } finally {
      release();
    }
  });

  it('completions (v1/completions): the prompt followed by the text so far', async () => {
    a.behaviour.resetAfterChunks = 5;
    const stream = await openai().completions.create({ model: MODEL, prompt: 'Once upon a time:', stream: true, max_tokens: 50 });
    let text = '';
    for await (const chunk of stream) text += chunk.choices[0]?.text ?? '';
    expect(text).toBe(REPLY);
    const sent = b.received.find((x) => x.url === '/v1/completions')!.json;
    expect(sent.prompt).toBe(`Once upon a time:${FIVE_WORDS}`);
    expect(sent.max_tokens).toBe(45);
  });
});

describe('continuation settings', () => {
  let g: Started;
  afterAll(() => g?.close());

  it('same_model_only keeps a fallback model out; enabled: false on the endpoint ends the stream as before', async () => {
    const ep = (f: FakeBackend, priority: number, extra = {}) => endpoint(f.name, 'pagedengine', f.url, { priority, check_interval: '60s', ...extra });
    g = await startGateway({
      model_fallbacks: { [MODEL]: [FALLBACK] },
      proxy: { continuation: { same_model_only: true } },
      discovery: { static: { endpoints: [ep(a, 100), ep(b, 50, { continuation: { enabled: false } }), ep(fb, 10)] } },
    });
    const client = new OpenAI({ baseURL: `${g.url}/gw/pagedengine/v1`, apiKey: 'unused', maxRetries: 0 });
    const read = async () => {
      let text = '';
      for await (const c of await client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'hi' }], stream: true }))
        text += c.choices[0]?.delta?.content ?? '';
      return text;
    };
    a.behaviour.resetAfterChunks = 6;
    b.behaviour.status = 503;
    await expect(read()).rejects.toThrow(/paged-a broke off the reply/);
    expect(chatSent(fb)).toHaveLength(0);
    // b's own streams are not continued (enabled: false there), whoever could.
    fakes().forEach((f) => f.reset());
    a.behaviour.status = 503;
    b.behaviour.resetAfterChunks = 6;
    await expect(read()).rejects.toThrow(/paged-b broke off the reply/);
    expect(chatSent(fb)).toHaveLength(0);
    const res = await request(`${g.url}/internal/status/endpoints`);
    expect(JSON.stringify(await res.body.json())).toContain('continuation');
  });

  it('max: 2 lets a continuation that breaks be continued once more', async () => {
    await g?.close();
    fakes().forEach((f) => f.reset());
    const ep = (f: FakeBackend, priority: number) => endpoint(f.name, 'pagedengine', f.url, { priority, check_interval: '60s' });
    g = await startGateway({
      model_fallbacks: { [MODEL]: [FALLBACK] },
      proxy: { continuation: { max: 2 } },
      discovery: { static: { endpoints: [ep(a, 100), ep(b, 50), ep(fb, 10)] } },
    });
    const client = new OpenAI({ baseURL: `${g.url}/gw/pagedengine/v1`, apiKey: 'unused', maxRetries: 0 });
    a.behaviour.resetAfterChunks = 6;
    b.behaviour.resetAfterChunks = 3;
    let text = '';
    for await (const c of await client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'hi' }], stream: true }))
      text += c.choices[0]?.delta?.content ?? '';
    expect(text).toBe(REPLY);
    expect(chatSent(fb)[0].messages.at(-1).content).toBe(`${FIVE_WORDS} over the`);
    expect(g.logs.find((l) => l.msg === 'request' && l.continuation)?.tried.map((t: { endpoint: string }) => t.endpoint)).toEqual(['paged-a', 'paged-b']);
  });
});
