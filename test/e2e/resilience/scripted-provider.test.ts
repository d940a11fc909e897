// The resilience suite's fake provider, talked to directly (no gateway): a broken fake must be
// told apart from a broken gateway.
import { afterEach, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { ScriptedProvider } from '../../fakes/scripted-provider.js';
import { timedChunks } from '../../helpers/http.js';
import { waitFor } from '../../helpers/wait.js';

let fake: ScriptedProvider;
afterEach(() => fake?.stop());

const chat = (stream: boolean, model = 'primary-model') => JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }], stream });
const sse = (text: string) =>
  text
    .split('\n\n')
    .filter(Boolean)
    .map((e) => e.slice('data: '.length));
const post = (path: string, body: string) => request(`${fake.url}${path}`, { method: 'POST', body, headers: { 'content-type': 'application/json' } });

describe('scripted provider, chat completions', () => {
  it('plays the script in order, then the default step, and records each request', async () => {
    fake = await new ScriptedProvider({ name: 'p' }).start();
    fake.script({ status: 429, headers: { 'retry-after': '2' } }, { status: 500 });
    const a = await post('/v1/chat/completions', chat(false));
    expect(a.statusCode).toBe(429);
    expect(a.headers['retry-after']).toBe('2');
    await a.body.dump();
    const b = await post('/v1/chat/completions', chat(false));
    expect(b.statusCode).toBe(500);
    await b.body.dump();
    const c = await post('/v1/chat/completions', chat(false));
    expect(c.statusCode).toBe(200);
    expect(((await c.body.json()) as any).choices[0].message.content).toBe('Hello from p');
    fake.always({ status: 503 });
    const d = await post('/v1/chat/completions', chat(false));
    expect(d.statusCode).toBe(503);
    await d.body.dump();
    expect(fake.generations.map((r) => r.model)).toEqual(['primary-model', 'primary-model', 'primary-model', 'primary-model']);
  });

  it('lists its models with context_window, the health route answering whatever the script says', async () => {
    fake = await new ScriptedProvider({
      models: [
        { name: 'primary-model', context: 8192 },
        { name: 'fallback-model', context: 128000 },
      ],
    }).start();
    fake.always({ status: 500 });
    const res = await request(`${fake.url}/v1/models`);
    expect(res.statusCode).toBe(200);
    expect(((await res.body.json()) as any).data).toMatchObject([
      { id: 'primary-model', context_window: 8192 },
      { id: 'fallback-model', context_window: 128000 },
    ]);
    expect(fake.generations).toHaveLength(0);
  });

  it('streams a normal answer: role chunk, content, finish_reason, [DONE]; finish can be content_filter', async () => {
    fake = await new ScriptedProvider({ text: 'one two three' }).start();
    fake.script({ ok: { finish: 'content_filter' } });
    const r = await timedChunks(`${fake.url}/v1/chat/completions`, { body: chat(true) });
    const events = sse(r.chunks.map((c) => c.text).join(''));
    expect(events.at(-1)).toBe('[DONE]');
    const parsed = events.slice(0, -1).map((e) => JSON.parse(e));
    expect(parsed[0].choices[0].delta).toEqual({ role: 'assistant', content: '' });
    expect(parsed.map((p) => p.choices[0].delta.content ?? '').join('')).toBe('one two three');
    expect(parsed.at(-1).choices[0].finish_reason).toBe('content_filter');
  });

  it('resets the connection before any header', async () => {
    fake = await new ScriptedProvider().start();
    fake.script('reset');
    await expect(post('/v1/chat/completions', chat(false))).rejects.toThrow();
    expect(fake.generations).toHaveLength(1);
  });

  it('hangs until the client gives up, counting the abandoned reply', async () => {
    fake = await new ScriptedProvider().start();
    fake.script('hang');
    const ac = new AbortController();
    const pending = request(`${fake.url}/v1/chat/completions`, { method: 'POST', body: chat(false), signal: ac.signal }).catch((e) => e);
    await waitFor(() => fake.generations.length === 1, 'the request to arrive');
    ac.abort();
    expect(await pending).toBeInstanceOf(Error);
    await waitFor(() => fake.aborted === 1, 'the abandoned reply to be counted');
  });

  it('cuts a stream after n content chunks: the body breaks, no finish, no [DONE]', async () => {
    fake = await new ScriptedProvider({ text: 'one two three four' }).start();
    fake.script({ stream: { cutAfter: 2 } });
    const r = await timedChunks(`${fake.url}/v1/chat/completions`, { body: chat(true) });
    expect(r.error).toBeDefined();
    const events = sse(r.chunks.map((c) => c.text).join(''));
    expect(events.map((e) => JSON.parse(e).choices[0].delta.content).join('')).toBe('one two');
    expect(fake.aborted).toBe(0);
  });

  it('ends a stream cleanly without its terminator, with an in-stream error, or with a malformed chunk', async () => {
    fake = await new ScriptedProvider({ text: 'one two three' }).start();
    fake.script({ stream: { noTerminator: true } }, { stream: { errorAt: 1 } }, { stream: { malformedAt: 1 } });
    const a = await timedChunks(`${fake.url}/v1/chat/completions`, { body: chat(true) });
    expect(a.error).toBeUndefined();
    const ae = sse(a.chunks.map((c) => c.text).join(''));
    expect(ae).not.toContain('[DONE]');
    expect(ae.every((e) => JSON.parse(e).choices[0].finish_reason === null)).toBe(true);
    const b = await timedChunks(`${fake.url}/v1/chat/completions`, { body: chat(true) });
    expect(JSON.parse(sse(b.chunks.map((c) => c.text).join('')).at(-1)!).error.message).toContain('failed mid-stream');
    const c = await timedChunks(`${fake.url}/v1/chat/completions`, { body: chat(true) });
    const ce = sse(c.chunks.map((x) => x.text).join(''));
    expect(ce[2]).toBe('{"this is not": json');
    expect(ce.at(-1)).toBe('[DONE]');
  });

  it('stalls after n chunks with the socket open, and sends a role-only chunk long before the content', async () => {
    fake = await new ScriptedProvider({ text: 'one two' }).start();
    fake.script({ stream: { stallAfter: 1 } }, { stream: { roleOnlyThenStallMs: 60_000 } });
    let text = '';
    const stalled = timedChunks(`${fake.url}/v1/chat/completions`, { body: chat(true) });
    await waitFor(() => fake.generations.length === 1, 'the stalled request');
    // Released by the test: the socket closes then, never before.
    const slow = (async () => {
      const { request: req } = await import('node:http');
      return new Promise<void>((resolve) => {
        const r = req(`${fake.url}/v1/chat/completions`, { method: 'POST', agent: false }, (res) => {
          res.setEncoding('utf8');
          res.on('data', (c: string) => (text += c));
          res.on('close', () => resolve());
        });
        r.end(chat(true));
      });
    })();
    await waitFor(() => text.includes('"role":"assistant"'), 'the role-only chunk');
    expect(text).not.toContain('"content":"one"');
    fake.release();
    await slow;
    const r = await stalled;
    expect(
      sse(r.chunks.map((c) => c.text).join(''))
        .slice(1)
        .map((e) => JSON.parse(e).choices[0].delta.content),
    ).toEqual(['one']);
  });

  it('refuses connections while down and answers again on the same port when back', async () => {
    fake = await new ScriptedProvider().start();
    const url = fake.url;
    await fake.setDown(true);
    await expect(request(`${url}/v1/models`)).rejects.toMatchObject({ code: 'ECONNREFUSED' });
    await fake.setDown(false);
    expect(fake.url).toBe(url);
    const res = await request(`${url}/v1/models`);
    expect(res.statusCode).toBe(200);
    await res.body.dump();
  });
});

describe('scripted provider, ndjson mode', () => {
  it('serves the localrunner routes: health, api/tags, api/show with the context, api/chat streaming NDJSON with done:true', async () => {
    fake = await new ScriptedProvider({ mode: 'ndjson', text: 'one two', models: [{ name: 'primary-model', context: 4096 }] }).start();
    expect(await (await request(`${fake.url}/`)).body.text()).toBe('Ollama is running');
    expect(((await (await request(`${fake.url}/api/tags`)).body.json()) as any).models[0].name).toBe('primary-model');
    const show = (await (await post('/api/show', JSON.stringify({ model: 'primary-model' }))).body.json()) as any;
    expect(show.model_info['llama.context_length']).toBe(4096);
    // Ollama streams when `stream` is absent.
    const r = await timedChunks(`${fake.url}/api/chat`, { body: JSON.stringify({ model: 'primary-model', messages: [] }) });
    const lines = r.chunks
      .map((c) => c.text)
      .join('')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(lines.map((l) => l.message.content).join('')).toBe('one two');
    expect(lines.at(-1)).toMatchObject({ done: true, done_reason: 'stop' });
  });

  it('ends with an {"error": …} line at errorAt, and without done:true at noTerminator', async () => {
    fake = await new ScriptedProvider({ mode: 'ndjson', text: 'one two' }).start();
    fake.script({ stream: { errorAt: 1 } }, { stream: { noTerminator: true } });
    const a = await timedChunks(`${fake.url}/api/chat`, { body: chat(true) });
    expect(
      JSON.parse(
        a.chunks
          .map((c) => c.text)
          .join('')
          .trim()
          .split('\n')
          .at(-1)!,
      ).error,
    ).toContain('failed mid-stream');
    const b = await timedChunks(`${fake.url}/api/chat`, { body: chat(true) });
    const lines = b.chunks
      .map((c) => c.text)
      .join('')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(lines.some((l) => l.done === true)).toBe(false);
    expect(b.error).toBeUndefined();
  });
});
