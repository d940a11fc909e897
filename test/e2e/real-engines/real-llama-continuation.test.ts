// Opt-in (GW_LLAMA_SERVER_DIR, see real-llama-server.test.ts): two real llama-servers serving the
// same model; the one answering is frozen and killed mid-stream, and the other finishes the
// answer — a chat completion and a native completion — through llama.cpp's own assistant prefill
// and prompt continuation. The model has random weights: the words are gibberish, but the
// prefill handling, the stream framing and the splice are the real server's.
import OpenAI from 'openai';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { closeAll, endpoint, startGateway, type Started } from '../../helpers/gateway.js';
import { LLAMA_SERVER_DIR, startLlamaServer, stopLlamaServers, type LlamaServer } from '../../helpers/llama-server.js';
import { waitFor } from '../../helpers/wait.js';

const MODEL = 'tiny-chat';

describe.skipIf(!LLAMA_SERVER_DIR)('a real llama-server killed mid-stream, another finishing the answer', () => {
  let first: LlamaServer, second: LlamaServer, gw: Started;

  beforeEach(async () => {
    first = await startLlamaServer(MODEL);
    second = await startLlamaServer(MODEL);
    const ep = (name: string, s: LlamaServer, priority: number) => endpoint(name, 'cppengine', s.url, { priority, check_interval: '60s' });
    gw = await startGateway({ discovery: { static: { endpoints: [ep('first', first, 100), ep('second', second, 50)] } } });
  }, 120_000);
  afterEach(async () => {
    await closeAll(gw, []);
    stopLlamaServers([first, second]);
  });

  /** Freeze the first server at its first words (nothing more leaves it), then kill it. */
  const killFirst = () => {
    process.kill(first.pid, 'SIGSTOP');
    process.kill(first.pid, 'SIGKILL');
  };

  const accessLog = () => waitFor(() => gw.logs.find((l) => l.msg === 'request' && l.continuation), 'the access log line');

  it('a chat completion: the client reads one stream, the words before the kill first', async () => {
    const client = new OpenAI({ baseURL: `${gw.url}/gw/cppengine/v1`, apiKey: 'x', maxRetries: 0 });
    const stream = await client.chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: 'Hello' }],
      stream: true,
      max_tokens: 600,
      temperature: 0,
      ignore_eos: true,
    } as OpenAI.ChatCompletionCreateParamsStreaming);
    let text = '';
    let before: string | null = null;
    let finish: string | null = null;
    const ids = new Set<string>();
    for await (const chunk of stream) {
      ids.add(chunk.id);
      text += chunk.choices[0]?.delta?.content ?? '';
      finish = chunk.choices[0]?.finish_reason ?? finish;
      if (before === null && text !== '') {
        before = text;
        killFirst();
      }
    }
    expect(finish).toBe('length');
    expect(ids.size).toBe(1);
    expect(text.startsWith(before!)).toBe(true);
    expect(text.length).toBeGreaterThan(before!.length);
    // llama.cpp repeats the prefill at the start of its answer: the client never sees it twice.
    const chars = gw.logs.find((l) => l.msg === 'the stream broke after its content; continuing it on the next candidate')!.chars as number;
    const prefill = text.slice(0, chars).trimEnd();
    expect(prefill.length).toBeGreaterThan(0);
    expect(text.slice(chars).startsWith(prefill)).toBe(false);
    const log = await accessLog();
    expect(log.continuation).toBe('continued');
    expect(log.endpoint).toBe('second');
    expect(log.tried[0]).toMatchObject({ endpoint: 'first', outcome: expect.stringMatching(/^stream_broken_midway/) });
  });

  it('a native completion: the prompt followed by the text so far', async () => {
    const res = await fetch(`${gw.url}/gw/cppengine/completion`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ prompt: 'The', n_predict: 300, temperature: 0, ignore_eos: true, stream: true }),
    });
    const reader = res.body!.getReader();
    const decoder = new TextDecoder();
    let raw = '';
    let killed = false;
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      raw += decoder.decode(value, { stream: true });
      if (!killed && raw.includes('"content":"')) {
        killed = true;
        killFirst();
      }
    }
    const events = raw
      .split('\n\n')
      .filter((e) => e.startsWith('data: '))
      .map((e) => JSON.parse(e.slice(6)));
    expect(events.filter((e) => e.stop === true)).toHaveLength(1);
    expect(events.at(-1).stop).toBe(true);
    expect(events.every((e) => e.error === undefined)).toBe(true);
    const log = await accessLog();
    expect(log.continuation).toBe('continued');
    expect(log.endpoint).toBe('second');
  });
});
