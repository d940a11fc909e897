// Token accounting per API key (auth:): every answered request's tokens — as the engine reported
// them in its reply (OpenAI-style usage, plain and streamed; Ollama's eval counts; llama.cpp's
// timings; the messages API's and the Responses API's usage, translated or passed through), or
// estimated and said so — filed under key × model × endpoint in GET /internal/usage and
// /internal/metrics. Each test uses a key of its own, so that its counts are its requests'.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { keyHash } from '../../../engine/core/keys.js';
import { FakeBackend } from '../../../engine/demo/index.js';
import { closeAll, endpoint, NO_RATE_LIMITS, startGateway, type Started } from '../../helpers/gateway.js';
import { waitFor } from '../../helpers/wait.js';

const NAMES = ['ops', 'plain', 'streamed', 'asked', 'bare', 'ollama', 'llama', 'msgapi', 'responses', 'other'] as const;
type Name = (typeof NAMES)[number];
const secret = (name: Name) => `gw-${name}-secret-usage`;

let paged: FakeBackend, runner: FakeBackend, cpp: FakeBackend, desk: FakeBackend, gw: Started;
beforeAll(async () => {
  paged = await new FakeBackend({ family: 'pagedengine', name: 'paged', models: [{ name: 'model-a' }], reply: 'one two three four five six' }).start();
  runner = await new FakeBackend({ family: 'localrunner', name: 'runner', models: [{ name: 'model-r' }], reply: 'alpha beta gamma' }).start();
  cpp = await new FakeBackend({ family: 'cppengine', name: 'cpp', models: [{ name: 'model-c' }], reply: 'uno dos tres cuatro' }).start();
  desk = await new FakeBackend({ family: 'deskrunner', name: 'desk', models: [{ name: 'model-d' }], reply: 'ein zwei drei' }).start();
  gw = await startGateway({
    auth: { keys: NAMES.map((name) => ({ name, hash: keyHash(secret(name)) })), admin: ['ops'] },
    server: { rate_limits: NO_RATE_LIMITS },
    discovery: {
      static: {
        endpoints: [
          endpoint('paged', 'pagedengine', paged.url),
          endpoint('runner', 'localrunner', runner.url),
          endpoint('cpp', 'cppengine', cpp.url),
          endpoint('desk', 'deskrunner', desk.url),
        ],
      },
    },
  });
  await waitFor(() => (gw.gw.runtime.catalogue.all().length >= 4 ? true : undefined), 'the four lists discovered');
});
afterAll(() => closeAll(gw, [paged, runner, cpp, desk]));

async function call(name: Name, path: string, body?: object) {
  const res = await request(`${gw.url}${path}`, {
    method: body ? 'POST' : 'GET',
    headers: { authorization: `Bearer ${secret(name)}`, ...(body ? { 'content-type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  const text = await res.body.text();
  return { status: res.statusCode, text };
}

/** The key's counters for one model, in total, as /internal/usage reports them. */
async function usageOf(name: Name, model: string) {
  const r = await call('ops', `/internal/usage?key=${name}`);
  expect(r.status).toBe(200);
  return JSON.parse(r.text).keys[name].total.models[model];
}

/** The last chat request a backend received (its health checks and model lists left out). */
const lastChat = (f: FakeBackend) => f.received.filter((r) => r.url.endsWith('/chat/completions')).at(-1)!;

/** The data of each SSE event, parsed (the [DONE] sentinel left out). */
const events = (text: string) =>
  text
    .split('\n')
    .filter((l) => l.startsWith('data: ') && l !== 'data: [DONE]')
    .map((l) => JSON.parse(l.slice(6)));

const chat = (model: string, more: object = {}) => ({ model, messages: [{ role: 'user', content: 'count these words for me please' }], ...more });

describe('token accounting per key', () => {
  it('a chat completion: the usage the engine reported, not estimated', async () => {
    const r = await call('plain', '/gw/pagedengine/v1/chat/completions', chat('model-a'));
    const usage = JSON.parse(r.text).usage;
    expect(await usageOf('plain', 'model-a')).toMatchObject({
      requests: 1,
      input_tokens: usage.prompt_tokens,
      output_tokens: usage.completion_tokens,
      estimated_tokens: 0,
    });
  });

  it('a stream that reports its usage (stream_options.include_usage): read from its last event', async () => {
    const r = await call('streamed', '/gw/pagedengine/v1/chat/completions', chat('model-a', { stream: true, stream_options: { include_usage: true } }));
    const usage = events(r.text).find((e) => e.usage)!.usage;
    expect(usage.completion_tokens).toBeGreaterThan(0);
    expect(await usageOf('streamed', 'model-a')).toMatchObject({
      requests: 1,
      input_tokens: usage.prompt_tokens,
      output_tokens: usage.completion_tokens,
      estimated_tokens: 0,
    });
  });

  it('a stream the client did not ask usage of: asked for it (the engine can report it), its extra event kept from the client', async () => {
    const r = await call('asked', '/gw/pagedengine/v1/chat/completions', chat('model-a', { stream: true }));
    const sent = lastChat(paged).json;
    expect(sent.stream_options).toEqual({ include_usage: true });
    const got = events(r.text);
    expect(got.every((e) => e.choices.length === 1 && e.usage === undefined)).toBe(true);
    expect(got.map((e) => e.choices[0].delta.content ?? '').join('')).toBe('one two three four five six');
    const counted = await usageOf('asked', 'model-a');
    expect(counted).toMatchObject({ requests: 1, estimated_tokens: 0 });
    expect(counted.output_tokens).toBeGreaterThan(0);
  });

  it('a stream whose client set other stream options: include_usage added to them, the extra event kept from the client', async () => {
    const r = await call(
      'asked',
      '/gw/pagedengine/v1/chat/completions',
      chat('model-a', { stream: true, stream_options: { include_usage: false, x_keep: 1 } }),
    );
    expect(lastChat(paged).json.stream_options).toEqual({ include_usage: true, x_keep: 1 });
    expect(events(r.text).every((e) => e.choices.length === 1 && e.usage === undefined)).toBe(true);
    expect(await usageOf('asked', 'model-a')).toMatchObject({ requests: 2, estimated_tokens: 0 });
  });

  it('a stream that reports nothing (an engine that cannot): estimated from what was sent and streamed, and said so', async () => {
    const r = await call('bare', '/gw/deskrunner/v1/chat/completions', chat('model-d', { stream: true }));
    expect(lastChat(desk).json.stream_options).toBeUndefined();
    const content = events(r.text).filter((e) => e.choices?.[0]?.delta?.content).length;
    expect(content).toBeGreaterThan(0);
    const got = await usageOf('bare', 'model-d');
    expect(got.output_tokens).toBe(content);
    expect(got.input_tokens).toBeGreaterThan(0);
    expect(got.estimated_tokens).toBe(got.input_tokens + got.output_tokens);
  });

  it("Ollama's native chat, streamed and whole: prompt_eval_count and eval_count", async () => {
    const streamed = (await call('ollama', '/gw/localrunner/api/chat', chat('model-r'))).text.trim().split('\n');
    const last = JSON.parse(streamed[streamed.length - 1]);
    const whole = JSON.parse((await call('ollama', '/gw/localrunner/api/chat', chat('model-r', { stream: false }))).text);
    expect(last.eval_count).toBeGreaterThan(0);
    expect(await usageOf('ollama', 'model-r')).toMatchObject({
      requests: 2,
      input_tokens: last.prompt_eval_count + whole.prompt_eval_count,
      output_tokens: last.eval_count + whole.eval_count,
      estimated_tokens: 0,
    });
  });

  it("llama.cpp's native completion, streamed: tokens_evaluated, tokens_predicted and its timings' cache_n", async () => {
    const r = await call('llama', '/gw/cppengine/completion', { model: 'model-c', prompt: 'count these words for me please', stream: true });
    const last = events(r.text).find((e) => e.stop === true)!;
    expect(last.tokens_predicted).toBeGreaterThan(0);
    const got = await usageOf('llama', 'model-c');
    expect(got).toMatchObject({
      requests: 1,
      input_tokens: last.tokens_evaluated,
      cached_input_tokens: last.timings.cache_n,
      output_tokens: last.tokens_predicted,
      estimated_tokens: 0,
    });
  });

  it('the messages API translated to chat completions: the backend’s usage, as the client was told', async () => {
    const r = await call('msgapi', '/gw/msgapi/v1/messages', { model: 'model-a', max_tokens: 64, messages: [{ role: 'user', content: 'hello there' }] });
    const reply = JSON.parse(r.text);
    expect(await usageOf('msgapi', 'model-a')).toMatchObject({
      requests: 1,
      input_tokens: reply.usage.input_tokens,
      output_tokens: reply.usage.output_tokens,
      estimated_tokens: 0,
    });
  });

  it('the Responses API, streamed: response.completed’s usage', async () => {
    const r = await call('responses', '/gw/pagedengine/v1/responses', { model: 'model-a', input: 'hello there', stream: true });
    const done = events(r.text).find((e) => e.type === 'response.completed');
    expect(done).toBeDefined();
    const got = await usageOf('responses', 'model-a');
    expect(got).toMatchObject({ requests: 1, input_tokens: done.response.usage.input_tokens, output_tokens: done.response.usage.output_tokens });
  });

  it('the report: today and in total, per model and summed; one key or all; an unknown key 404', async () => {
    await call('other', '/gw/pagedengine/v1/chat/completions', chat('model-a'));
    await call('other', '/gw/localrunner/api/chat', chat('model-r', { stream: false }));
    const r = JSON.parse((await call('ops', '/internal/usage')).text);
    const other = r.keys.other;
    expect(Object.keys(other.today.models).sort()).toEqual(['model-a', 'model-r']);
    expect(other.today.all.requests).toBe(2);
    expect(other.total.all).toEqual(other.today.all);
    expect(other.today.day).toBe(new Date().toISOString().slice(0, 10));
    expect(Object.keys(r.keys)).toEqual(expect.arrayContaining([...NAMES]));
    expect((await call('ops', '/internal/usage?key=nobody')).status).toBe(404);
    expect((await call('plain', '/internal/usage')).status).toBe(403);
  });

  it('/internal/metrics: requests and tokens per key, model and endpoint', async () => {
    const text = (await call('ops', '/internal/metrics')).text;
    expect(text).toMatch(/gw_key_requests_total\{key="plain",model="model-a",endpoint="paged"\} 1/);
    expect(text).toMatch(/gw_key_tokens_total\{key="ollama",model="model-r",endpoint="runner",type="output"\} 14/);
    expect(text).toMatch(/gw_key_tokens_total\{key="bare",model="model-d",endpoint="desk",type="estimated"\} [1-9]/);
    expect(text).not.toContain(secret('plain'));
  });
});

describe('token accounting through a continuation', () => {
  let a: FakeBackend, b: FakeBackend, gw2: Started;
  beforeAll(async () => {
    const reply = 'The quick brown fox jumps over the lazy dog while the cat watches';
    a = await new FakeBackend({ family: 'pagedengine', name: 'paged-a', models: [{ name: 'model-k' }], reply }).start();
    b = await new FakeBackend({ family: 'pagedengine', name: 'paged-b', models: [{ name: 'model-k' }], reply }).start();
    const ep = (f: FakeBackend, priority: number) => endpoint(f.name, 'pagedengine', f.url, { priority, check_interval: '60s' });
    gw2 = await startGateway({
      auth: {
        keys: [
          { name: 'ops', hash: keyHash(secret('ops')) },
          { name: 'other', hash: keyHash(secret('other')) },
        ],
        admin: ['ops'],
      },
      server: { rate_limits: NO_RATE_LIMITS },
      discovery: { static: { endpoints: [ep(a, 100), ep(b, 50)] } },
    });
  });
  afterAll(() => closeAll(gw2, [a, b]));

  it('each attempt that reached the client counts: the broken one estimated, the one that finished it as reported', async () => {
    a.behaviour.resetAfterChunks = 6; // the role chunk and five words
    const res = await request(`${gw2.url}/gw/pagedengine/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${secret('other')}`, 'content-type': 'application/json' },
      body: JSON.stringify(chat('model-k', { stream: true, stream_options: { include_usage: true } })),
    });
    const got = events(await res.body.text());
    expect(got.map((e) => e.choices?.[0]?.delta?.content ?? '').join('')).toBe('The quick brown fox jumps over the lazy dog while the cat watches');
    const reported = got.find((e) => e.usage)!.usage;
    const r = JSON.parse(await (await request(`${gw2.url}/internal/usage?key=other`, { headers: { authorization: `Bearer ${secret('ops')}` } })).body.text())
      .keys.other.total.models['model-k'];
    // paged-a streamed five words (five content events: its output's estimate) and no usage.
    expect(r.requests).toBe(1);
    expect(r.output_tokens).toBe(5 + reported.completion_tokens);
    expect(r.input_tokens).toBeGreaterThan(reported.prompt_tokens);
    expect(r.estimated_tokens).toBe(r.input_tokens - reported.prompt_tokens + 5);
  });
});
