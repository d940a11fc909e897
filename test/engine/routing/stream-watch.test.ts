// StreamWatch: first content, backend errors, malformed events and the terminator, found in
// streams exactly as our fake backends send them (captured from engine/demo, so the shapes stay
// those of the fakes) and in the recorded messages-API streams, whatever the chunking.
import fc from 'fast-check';
import { readFileSync } from 'node:fs';
import type { ServerResponse } from 'node:http';
import { describe, expect, it } from 'vitest';
import { FakeBackend, type Behaviour } from '../../../engine/demo/index.js';
import { routesFor } from '../../../engine/demo/families.js';
import { MAX_EVENT_BYTES, StreamWatch, streamFormatOf, type Seen, type StreamFormat } from '../../../engine/routing/stream-watch.js';
import { INFERENCE_STREAMS } from '../../../plugins/apis/inference-api.js';

const RUNS = Number(process.env.FC_RUNS ?? 200);

/** The pieces a fake of `family` streams for a request, and their content type. */
async function demoStream(
  family: string,
  route: string,
  body: object,
  setup: (f: FakeBackend) => void = () => {},
): Promise<{ pieces: string[]; format: StreamFormat }> {
  const fake = new FakeBackend({ family, name: family, reply: 'Grüße aus 日本 🙂 done', toolCalls: [{ name: 'get_weather', arguments: '{"city":"Paris"}' }] });
  setup(fake);
  let out: { pieces: string[]; format: StreamFormat } | null = null;
  fake.writeStream = async (_res, pieces, contentType) => {
    out = { pieces, format: streamFormatOf(contentType)! };
  };
  const [method, path] = route.split(' ');
  const text = JSON.stringify(body);
  await routesFor(family)
    .get(route)!
    .fn(fake, { method, url: path, headers: {}, body: Buffer.from(text), text, json: body }, {} as ServerResponse);
  expect(out, `${family} ${route} streams`).not.toBeNull();
  return out!;
}

const chat = (extra: object = {}) => ({ model: 'test-model', stream: true, messages: [{ role: 'user', content: 'hi' }], ...extra });
const behave = (b: Partial<Behaviour>) => (f: FakeBackend) => Object.assign(f.behaviour, b);

/** Every event as its own chunk: what each showed. */
function perEvent(format: StreamFormat, pieces: string[]): { seen: Seen[]; w: StreamWatch } {
  const w = new StreamWatch(format, INFERENCE_STREAMS);
  return { seen: pieces.map((p) => w.feed(Buffer.from(p))), w };
}

/** Feed the bytes cut at these offsets; returns what each chunk showed. */
function feedCut(format: StreamFormat, bytes: Buffer, cuts: number[]): { seen: Seen[]; w: StreamWatch } {
  const w = new StreamWatch(format, INFERENCE_STREAMS);
  const at = bounds(bytes.length, cuts);
  const seen: Seen[] = [];
  for (let i = 1; i < at.length; i++) seen.push(w.feed(bytes.subarray(at[i - 1], at[i])));
  return { seen, w };
}

/** The distinct chunk boundaries, 0 and the end included (no empty chunks). */
const bounds = (length: number, cuts: number[]) => [...new Set([0, ...cuts, length])].sort((a, b) => a - b);

const sse = (...events: object[]) => events.map((e) => `data: ${JSON.stringify(e)}\n\n`);
const nd = (...lines: object[]) => lines.map((l) => `${JSON.stringify(l)}\n`);
const chunk = (delta: object, finish: string | null = null) => ({
  id: 'c1',
  object: 'chat.completion.chunk',
  created: 1,
  model: 'm',
  choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
});

describe('streamFormatOf', () => {
  it('knows SSE and the NDJSON/JSONL types, with or without parameters, and nothing else', () => {
    expect(streamFormatOf('text/event-stream')).toBe('sse');
    expect(streamFormatOf('Text/Event-Stream; charset=utf-8')).toBe('sse');
    for (const t of ['application/x-ndjson', 'application/ndjson; charset=utf-8', 'application/jsonl', 'application/x-jsonlines'])
      expect(streamFormatOf(t)).toBe('ndjson');
    for (const t of [undefined, '', 'application/json', 'text/plain', 'application/ndjsonx']) expect(streamFormatOf(t)).toBeNull();
  });
});

describe('the fakes’ streams, one event per chunk', () => {
  it('chat-completions: the role-only chunk is no content, the first text is; finish_reason + [DONE] complete it', async () => {
    const { pieces, format } = await demoStream('pagedengine', 'POST /v1/chat/completions', chat({ stream_options: { include_usage: true } }));
    const { seen, w } = perEvent(format, pieces);
    expect(seen).toEqual(['none', 'content', ...pieces.slice(2).map(() => 'none')]);
    expect(w.complete).toBe(true);
    expect(w.hasContent).toBe(true);
    expect(w.badEventAt).toBe(-1);
  });

  it('chat-completions with reasoning: the first reasoning piece is content', async () => {
    const { pieces, format } = await demoStream('pagedengine', 'POST /v1/chat/completions', chat(), (f) => (f.reasoning = 'Let me think'));
    expect(pieces[1]).toContain('reasoning_content');
    expect(perEvent(format, pieces).seen.slice(0, 3)).toEqual(['none', 'content', 'none']);
  });

  it('chat-completions with only a tool call: its first delta is content', async () => {
    const { pieces, format } = await demoStream(
      'pagedengine',
      'POST /v1/chat/completions',
      chat({ tools: [{ type: 'function', function: { name: 'get_weather' } }] }),
      (f) => (f.reply = ''),
    );
    expect(pieces[1]).toContain('tool_calls');
    const { seen, w } = perEvent(format, pieces);
    expect(seen.slice(0, 2)).toEqual(['none', 'content']);
    expect(w.complete).toBe(true);
  });

  it('legacy completions: the first text is content', async () => {
    const { pieces, format } = await demoStream('pagedengine', 'POST /v1/completions', { model: 'test-model', prompt: 'hi', stream: true });
    const { seen, w } = perEvent(format, pieces);
    expect(seen[0]).toBe('content');
    expect(w.complete).toBe(true);
  });

  it('Responses API: created, in_progress, output_item.added and content_part.added are no content; response.completed ends it', async () => {
    const { pieces, format } = await demoStream('pagedengine', 'POST /v1/responses', { model: 'test-model', input: 'hi', stream: true });
    const { seen, w } = perEvent(format, pieces);
    expect(seen.slice(0, 5)).toEqual(['none', 'none', 'none', 'none', 'content']);
    expect(pieces[4]).toContain('response.output_text.delta');
    expect(pieces.at(-1)).toContain('response.completed');
    expect(pieces.join('')).not.toContain('[DONE]');
    expect(w.complete).toBe(true);
  });

  it('Responses API: response.incomplete is a terminator too', () => {
    const w = new StreamWatch('sse', INFERENCE_STREAMS);
    w.feed(Buffer.from('event: response.output_text.delta\ndata: {"type":"response.output_text.delta","delta":"Hi"}\n\n'));
    expect(w.complete).toBe(false);
    w.feed(
      Buffer.from(
        'event: response.incomplete\ndata: {"type":"response.incomplete","response":{"status":"incomplete","incomplete_details":{"reason":"max_output_tokens"}}}\n\n',
      ),
    );
    expect(w.complete).toBe(true);
  });

  it('messages API (native): message_start and content_block_start are no content; message_stop ends it', async () => {
    const { pieces, format } = await demoStream('pagedengine', 'POST /v1/messages', {
      model: 'test-model',
      max_tokens: 10,
      stream: true,
      messages: [{ role: 'user', content: 'hi' }],
    });
    const { seen, w } = perEvent(format, pieces);
    expect(seen.slice(0, 3)).toEqual(['none', 'none', 'content']);
    expect(w.complete).toBe(true);
  });

  it('the recorded messages-API streams: ping is no content either; the first text_delta is', () => {
    for (const name of ['basic-text.sse', 'text-then-tool-use.sse']) {
      const events = readFileSync(`test/fixtures/msgapi/${name}`, 'utf8').split(/(?<=\n\n)/);
      const { seen, w } = perEvent('sse', events);
      expect(events[2]).toContain('event: ping');
      expect(seen.indexOf('content'), name).toBe(3);
      expect(w.complete, name).toBe(true);
    }
  });

  it('Ollama NDJSON chat and generate: content lines, then done: true completes', async () => {
    for (const route of ['POST /api/chat', 'POST /api/generate']) {
      const { pieces, format } = await demoStream('localrunner', route, { model: 'test-model', prompt: 'hi', messages: [] });
      expect(format).toBe('ndjson');
      const { seen, w } = perEvent(format, pieces);
      expect(seen[0], route).toBe('content');
      expect(w.complete, route).toBe(true);
      const cut = perEvent(format, pieces.slice(0, -1)).w;
      expect(cut.complete, `${route} without its done line`).toBe(false);
      expect(cut.hasContent).toBe(true);
    }
  });

  it('llama.cpp native /completion: {content, stop: false} pieces, then stop: true completes', async () => {
    const { pieces, format } = await demoStream('cppengine', 'POST /completion', { prompt: 'hi', stream: true });
    const { seen, w } = perEvent(format, pieces);
    expect(seen[0]).toBe('content');
    expect(w.complete).toBe(true);
    expect(perEvent(format, pieces.slice(0, -1)).w.complete).toBe(false);
  });
});

describe('terminators', () => {
  it('[DONE] alone completes the stream (and counts as content: nothing more will come)', async () => {
    const { pieces, format } = await demoStream('pagedengine', 'POST /v1/chat/completions', chat(), behave({ emptyStream: true }));
    expect(pieces).toEqual(['data: [DONE]\n\n']);
    const { seen, w } = perEvent(format, pieces);
    expect(seen).toEqual(['content']);
    expect(w.complete).toBe(true);
  });

  for (const finish of ['length', 'content_filter']) {
    it(`finish_reason ${finish} is an answer: complete`, async () => {
      const { pieces, format } = await demoStream('pagedengine', 'POST /v1/chat/completions', chat(), behave({ finishReason: finish }));
      // Without the [DONE] line: the finish_reason alone is the terminator.
      const w = perEvent(format, pieces.slice(0, -1)).w;
      expect(pieces.at(-2)).toContain(`"finish_reason":"${finish}"`);
      expect(w.complete).toBe(true);
      expect(w.badEventAt).toBe(-1);
    });
  }

  it('a finish_reason on the first chunk is content and completes (an empty answer that ended)', () => {
    const w = new StreamWatch('sse', INFERENCE_STREAMS);
    expect(w.feed(Buffer.from(sse(chunk({}, 'stop'))[0]))).toBe('content');
    expect(w.complete).toBe(true);
  });

  it('a stream cut without its terminator is not complete, content or not', async () => {
    const { pieces, format } = await demoStream('pagedengine', 'POST /v1/chat/completions', chat());
    const body = Buffer.from(pieces.join(''));
    const finishAt = body.indexOf('"finish_reason":"stop"');
    for (const end of [0, 20, body.indexOf('Gr'), finishAt, finishAt + 5]) {
      const w = feedCut(format, body.subarray(0, end), []).w;
      expect(w.complete, `cut at ${end}`).toBe(false);
    }
    // The terminating event's blank line is what completes it.
    const lastEventEnd = body.indexOf('\n\n', finishAt);
    expect(feedCut(format, body.subarray(0, lastEventEnd + 1), []).w.complete).toBe(false);
    expect(feedCut(format, body.subarray(0, lastEventEnd + 2), []).w.complete).toBe(true);
  });
});

describe('no content yet', () => {
  const empties: [string, string][] = [
    ['role-only chunk', sse(chunk({ role: 'assistant', content: '' }))[0]],
    ['role-only chunk, content null', sse(chunk({ role: 'assistant', content: null }))[0]],
    ['empty delta', sse(chunk({}))[0]],
    [
      'usage-only chunk',
      sse({ id: 'c1', object: 'chat.completion.chunk', choices: [], usage: { prompt_tokens: 5, completion_tokens: 0, total_tokens: 5 } })[0],
    ],
    [
      'prompt filter results (choices empty)',
      sse({ id: '', object: '', created: 0, model: '', choices: [], prompt_filter_results: [{ prompt_index: 0, content_filter_results: {} }] })[0],
    ],
    ['empty tool_calls array', sse(chunk({ role: 'assistant', tool_calls: [] }))[0]],
    ['keep-alive comment', ': keep-alive\n\n'],
    ['comment without space', ':ping\n\n'],
    ['an event with no data', 'event: ping\n\n'],
    ['id and retry only', 'id: 7\nretry: 1000\n\n'],
    ['llama.cpp {content:"", stop:false}', sse({ content: '', stop: false, id_slot: 0, multimodal: false, index: 0 })[0]],
    ['messages-API ping', 'event: ping\ndata: {"type": "ping"}\n\n'],
  ];
  for (const [what, bytes] of empties) {
    it(`SSE: ${what}`, () => {
      const w = new StreamWatch('sse', INFERENCE_STREAMS);
      expect(w.feed(Buffer.from(bytes))).toBe('none');
      expect(w.hasContent).toBe(false);
      expect(w.complete).toBe(false);
    });
  }

  const ndEmpties: [string, string][] = [
    ['Ollama chat, empty message', nd({ model: 'm', created_at: 't', message: { role: 'assistant', content: '' }, done: false })[0]],
    ['Ollama generate, empty response', nd({ model: 'm', created_at: 't', response: '', done: false })[0]],
    ['a blank line', '\n'],
    ['a line of spaces, CRLF', '   \r\n'],
  ];
  for (const [what, bytes] of ndEmpties) {
    it(`NDJSON: ${what}`, () => {
      const w = new StreamWatch('ndjson', INFERENCE_STREAMS);
      expect(w.feed(Buffer.from(bytes))).toBe('none');
      expect(w.hasContent).toBe(false);
    });
  }
});

describe('content', () => {
  const contents: [StreamFormat, string, string][] = [
    ['sse', 'text delta', sse(chunk({ content: 'Hi' }))[0]],
    ['sse', 'refusal', sse(chunk({ refusal: 'I cannot' }))[0]],
    ['sse', 'reasoning (the other spelling)', sse(chunk({ reasoning: 'hmm' }))[0]],
    ['sse', 'legacy function_call', sse(chunk({ function_call: { name: 'f', arguments: '' } }))[0]],
    ['sse', 'an unknown shape', 'data: {"token":{"text":"Hi"},"generated_text":null}\n\n'],
    ['sse', 'a JSON string', 'data: "Hi"\n\n'],
    ['sse', 'a choice of unknown shape', 'data: {"choices":[{"index":0,"output":"Hi"}]}\n\n'],
    ['sse', 'multi-line data', 'data: {"choices":[{"index":0,\ndata: "delta":{"content":"Hi"}}]}\n\n'],
    [
      'ndjson',
      'Ollama tool call',
      nd({ model: 'm', message: { role: 'assistant', content: '', tool_calls: [{ function: { name: 'f', arguments: {} } }] }, done: false })[0],
    ],
    ['ndjson', 'Ollama thinking', nd({ model: 'm', message: { role: 'assistant', content: '', thinking: 'hmm' }, done: false })[0]],
    ['ndjson', 'Ollama generate thinking', nd({ model: 'm', response: '', thinking: 'hmm', done: false })[0]],
    ['ndjson', 'an unknown line (a pull status)', nd({ status: 'pulling manifest' })[0]],
  ];
  for (const [format, what, bytes] of contents) {
    it(`${format}: ${what}`, () => {
      const w = new StreamWatch(format, INFERENCE_STREAMS);
      expect(w.feed(Buffer.from(bytes))).toBe('content');
      expect(w.hasContent).toBe(true);
      expect(w.complete).toBe(false);
      // Only the first content is announced.
      expect(w.feed(Buffer.from(bytes))).toBe('none');
    });
  }
});

describe('errors from the backend', () => {
  const errors: [StreamFormat, string, string, string][] = [
    [
      'sse',
      'chat-completions error chunk',
      'data: {"error":{"message":"The server is overloaded","type":"server_error","code":503}}\n\n',
      'The server is overloaded',
    ],
    ['sse', 'messages-API error event', 'event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}\n\n', 'Overloaded'],
    ['sse', 'event: error with text data', 'event: error\ndata: upstream connect error\n\n', 'upstream connect error'],
    [
      'sse',
      'Responses API error',
      'event: error\ndata: {"type":"error","code":"server_error","message":"Something went wrong","param":null,"sequence_number":3}\n\n',
      'Something went wrong',
    ],
    [
      'sse',
      'Responses API response.failed',
      'event: response.failed\ndata: {"type":"response.failed","response":{"id":"r","status":"failed","error":{"code":"server_error","message":"The model failed"}}}\n\n',
      'The model failed',
    ],
    ['sse', 'type error without an event name', 'data: {"type":"error","message":"bad"}\n\n', 'bad'],
    ['sse', 'error as a string', 'data: {"error":"CUDA out of memory"}\n\n', 'CUDA out of memory'],
    ['sse', 'llama.cpp `error:` line', 'error: {"code":500,"message":"failed to decode the batch","type":"server_error"}\n\n', 'failed to decode the batch'],
    [
      'sse',
      'vLLM object: error',
      'data: {"object":"error","message":"Engine loop has died","type":"InternalServerError","param":null,"code":500}\n\n',
      'Engine loop has died',
    ],
    ['ndjson', 'Ollama error line', '{"error":"model runner has unexpectedly stopped"}\n', 'model runner has unexpectedly stopped'],
  ];
  for (const [format, what, bytes, message] of errors) {
    it(`${format}: ${what}, before any content`, () => {
      const w = new StreamWatch(format, INFERENCE_STREAMS);
      expect(w.feed(Buffer.from(bytes))).toBe('error');
      expect(w.hasContent).toBe(false);
      expect(w.complete).toBe(false);
      expect(w.badEventAt).toBe(0);
      expect(w.problem).toContain(message);
    });
  }

  it('an error after content, in the same chunk: error wins; badEventAt is where the error event begins', () => {
    const before = `: keep-alive\n\n${sse(chunk({ role: 'assistant' }), chunk({ content: 'Hi' })).join('')}`;
    const error = 'data: {"error":{"message":"GPU fell off the bus"}}\n\n';
    const w = new StreamWatch('sse', INFERENCE_STREAMS);
    expect(w.feed(Buffer.from(before + error + sse(chunk({ content: 'not examined' }))[0]))).toBe('error');
    expect(w.hasContent).toBe(true);
    expect(w.badEventAt).toBe(Buffer.byteLength(before));
    expect(w.problem).toBe('backend error: GPU fell off the bus');
    // The stream is over for the kernel: what comes after is not examined.
    expect(w.feed(Buffer.from(`${sse(chunk({}, 'stop'))[0]}data: [DONE]\n\n`))).toBe('none');
    expect(w.complete).toBe(false);
    expect(w.badEventAt).toBe(Buffer.byteLength(before));
  });

  it('llama.cpp: an `error:` line followed by [DONE] is an error, never a complete stream', () => {
    const w = new StreamWatch('sse', INFERENCE_STREAMS);
    const bytes = `${sse(chunk({ content: 'Hi' }))[0]}error: {"code":400,"message":"the request exceeds the available context size"}\n\ndata: [DONE]\n\n`;
    expect(w.feed(Buffer.from(bytes))).toBe('error');
    expect(w.complete).toBe(false);
    expect(w.problem).toBe('backend error: the request exceeds the available context size');
  });

  it('an error event that began in an earlier chunk: where it began in the stream', () => {
    const w = new StreamWatch('sse', INFERENCE_STREAMS);
    const first = sse(chunk({ content: 'Hi' }))[0];
    expect(w.feed(Buffer.from(`${first}event: err`))).toBe('content');
    expect(w.feed(Buffer.from('or\ndata: {"type":"error","error":{"message":"x"}}\n\n'))).toBe('error');
    expect(w.badEventAt).toBe(Buffer.byteLength(first));
  });

  it('a long error message is cut to 200 characters', () => {
    const w = new StreamWatch('ndjson', INFERENCE_STREAMS);
    w.feed(Buffer.from(`${JSON.stringify({ error: 'e'.repeat(5000) })}\n`));
    expect(w.problem.length).toBeLessThanOrEqual(200);
    expect(w.problem).toMatch(/^backend error: e+…$/);
  });

  it('the error message survives UTF-8 sequences split at every byte', () => {
    const bytes = Buffer.from(
      `data: ${JSON.stringify({ choices: [{ index: 0, delta: { content: 'Grüße' } }] })}\n\nevent: error\ndata: ${JSON.stringify({ type: 'error', error: { message: 'Überlastet: 日本 🙂' } })}\n\n`,
    );
    for (let i = 0; i <= bytes.length; i++) {
      const { seen, w } = feedCut('sse', bytes, [i]);
      expect(
        seen.filter((s) => s === 'error'),
        `cut at ${i}`,
      ).toHaveLength(1);
      expect(w.problem, `cut at ${i}`).toBe('backend error: Überlastet: 日本 🙂');
    }
  });
});

describe('malformed events', () => {
  it('the fake’s malformed chunk: malformed at that event, with an excerpt in the problem', async () => {
    const { pieces, format } = await demoStream('pagedengine', 'POST /v1/chat/completions', chat(), behave({ malformedChunk: true }));
    const at = pieces.indexOf('data: {"this is not": json\n\n');
    expect(at).toBeGreaterThan(0);
    const bytes = Buffer.from(pieces.join(''));
    const w = new StreamWatch(format, INFERENCE_STREAMS);
    expect(w.feed(bytes)).toBe('malformed');
    expect(w.badEventAt).toBe(Buffer.byteLength(pieces.slice(0, at).join('')));
    expect(w.problem).toContain('not JSON');
    expect(w.problem).toContain('{\\"this is not\\": json');
    expect(w.hasContent).toBe(false);
  });

  it('an NDJSON line that is not JSON', () => {
    const first = nd({ model: 'm', message: { role: 'assistant', content: 'Hi' }, done: false })[0];
    const w = new StreamWatch('ndjson', INFERENCE_STREAMS);
    expect(w.feed(Buffer.from(`${first}{"model":"m","message":{"role":"assis\n`))).toBe('malformed');
    expect(w.hasContent).toBe(true);
    expect(w.badEventAt).toBe(Buffer.byteLength(first));
  });

  it('a line over 1 MiB arriving in pieces is malformed as soon as it passes the bound; nothing more is kept', () => {
    const w = new StreamWatch('ndjson', INFERENCE_STREAMS);
    const piece = Buffer.alloc(64 * 1024, 'a');
    w.feed(Buffer.from('{"response":"'));
    let seen: Seen = 'none';
    let fed = 0;
    for (let i = 0; i < 40 && seen === 'none'; i++, fed++) seen = w.feed(piece);
    expect(seen).toBe('malformed');
    expect(fed).toBe(16); // 13 + 16 × 64 KiB > 1 MiB
    expect(w.problem).toContain('longer than');
    expect(w.badEventAt).toBe(0);
  });

  it('a line over 1 MiB inside one chunk is malformed', () => {
    const line = `{"response":"${'a'.repeat(MAX_EVENT_BYTES)}","done":false}\n`;
    const w = new StreamWatch('ndjson', INFERENCE_STREAMS);
    expect(w.feed(Buffer.from(nd({ response: 'ok', done: false })[0] + line))).toBe('malformed');
    expect(w.badEventAt).toBe(Buffer.byteLength(nd({ response: 'ok', done: false })[0]));
  });

  it('an SSE event over 1 MiB of short data lines is malformed', () => {
    const w = new StreamWatch('sse', INFERENCE_STREAMS);
    const lines = Buffer.from('data: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n'.repeat(20_000));
    expect(w.feed(lines)).toBe('malformed');
  });

  it('a JSON line of exactly the bound is still read', () => {
    const w = new StreamWatch('ndjson', INFERENCE_STREAMS);
    const head = '{"response":"';
    const tail = '","done":false}';
    const line = head + 'a'.repeat(MAX_EVENT_BYTES - head.length - tail.length) + tail;
    expect(w.feed(Buffer.from(line.slice(0, 1000)))).toBe('none');
    expect(w.feed(Buffer.from(`${line.slice(1000)}\n`))).toBe('content');
  });
});

describe('any chunking', () => {
  const family = async () => {
    const chatStream = await demoStream(
      'pagedengine',
      'POST /v1/chat/completions',
      chat({ stream_options: { include_usage: true } }),
      (f) => (f.reasoning = 'Hmm, ünïcode'),
    );
    const responsesStream = await demoStream('pagedengine', 'POST /v1/responses', { model: 'test-model', input: 'hi', stream: true });
    const ollama = await demoStream('localrunner', 'POST /api/chat', { model: 'test-model', messages: [] });
    const recorded = { pieces: [readFileSync('test/fixtures/msgapi/text-then-tool-use.sse', 'utf8')], format: 'sse' as StreamFormat };
    return { chatStream, responsesStream, ollama, recorded };
  };
  const crlf = (s: { pieces: string[]; format: StreamFormat }) => ({ pieces: s.pieces.map((p) => p.replace(/\n/g, '\r\n')), format: s.format });

  /** Where the first content event is dispatched (the offset past its last byte) in a whole stream. */
  function firstContentEnd(format: StreamFormat, bytes: Buffer): number {
    for (let i = 1; i <= bytes.length; i++) if (feedCut(format, bytes.subarray(0, i), []).w.hasContent) return i;
    throw new Error('no content');
  }

  it('every split into two chunks, at every byte, gives the same answer (LF and CRLF)', async () => {
    const streams = await family();
    for (const [name, s] of Object.entries({ ...streams, chatCrlf: crlf(streams.chatStream), ollamaCrlf: crlf(streams.ollama) })) {
      const bytes = Buffer.from(s.pieces.join(''));
      const firstAt = firstContentEnd(s.format, bytes);
      for (let i = 0; i <= bytes.length; i++) {
        const { seen, w } = feedCut(s.format, bytes, [i]);
        // 'content' once, from the chunk holding the first content event's last byte.
        const expected = i === 0 || i === bytes.length ? ['content'] : i >= firstAt ? ['content', 'none'] : ['none', 'content'];
        expect(seen, `${name} cut at ${i}`).toEqual(expected);
        expect(w.complete, `${name} cut at ${i}`).toBe(true);
        expect(w.badEventAt).toBe(-1);
      }
    }
  });

  it('property: any chunking of any stream (LF or CRLF) finds the same first content, completion and no problem', async () => {
    const streams = await family();
    const all = Object.values(streams)
      .flatMap((s) => [s, crlf(s)])
      .map((s) => {
        const bytes = Buffer.from(s.pieces.join(''));
        return { format: s.format, bytes, firstAt: firstContentEnd(s.format, bytes) };
      });
    fc.assert(
      fc.property(fc.constantFrom(...all), fc.array(fc.nat(), { maxLength: 30 }), ({ format, bytes, firstAt }, raw) => {
        const cuts = raw.map((n) => n % (bytes.length + 1));
        const { seen, w } = feedCut(format, bytes, cuts);
        expect(seen.filter((x) => x === 'content')).toHaveLength(1);
        expect(seen.filter((x) => x !== 'content' && x !== 'none')).toHaveLength(0);
        // The chunk that announced content is the one that holds the first content's last byte.
        const at = bounds(bytes.length, cuts);
        const k = seen.indexOf('content');
        expect(at[k] < firstAt && firstAt <= at[k + 1]).toBe(true);
        expect(w.complete).toBe(true);
        expect(w.hasContent).toBe(true);
      }),
      { numRuns: RUNS },
    );
  });

  it('a byte-order mark before the first line is not part of it', () => {
    const w = new StreamWatch('sse', INFERENCE_STREAMS);
    expect(w.feed(Buffer.from([0xef, 0xbb]))).toBe('none');
    expect(w.feed(Buffer.from([0xbf, ...Buffer.from(sse(chunk({ content: 'Hi' }))[0])]))).toBe('content');
  });
});

describe('after the first content (most events are checked for shape, not parsed)', () => {
  it('an event that looks like an object but is not JSON inside is still malformed', () => {
    for (const bad of ['{not valid json}', '{"a": }', '{ , "a": 1}']) {
      const { seen } = perEvent('sse', [...sse(chunk({ content: 'hi' })), `data: ${bad}\n\n`]);
      expect(seen, bad).toEqual(['content', 'malformed']);
    }
  });

  it('a chunk of one whole event (read without its lines) finds what the same bytes read line by line find', () => {
    const tokens = Array.from({ length: 4 }, (_, i) => chunk({ content: `t${i}` }));
    const streams: [StreamFormat, string[]][] = [
      ['sse', [...sse(...tokens, chunk({}, 'stop')), 'data: [DONE]\n\n']],
      ['sse', [...sse(...tokens), 'data: {"error":{"message":"overloaded"}}\n\n']],
      ['sse', [...sse(...tokens), 'data:{"choices":[{"delta":{"content":"no space"}}]}\n\n', 'data: {"a": }\n\n']],
      ['sse', [...sse(...tokens), `data: {"choices":[{"delta":{"content":"${'a'.repeat(MAX_EVENT_BYTES)}"}}]}\n\n`]],
      ['ndjson', nd({ message: { content: 'a' }, done: false }, { message: { content: 'b' }, done: false }, { done: true })],
      ['ndjson', [...nd({ response: 'a', done: false }, { response: 'b', done: false }), '{"response": }\n']],
    ];
    for (const [format, pieces] of streams) {
      const whole = perEvent(format, pieces).w;
      const bytes = Buffer.from(pieces.join(''));
      const byByte = feedCut(
        format,
        bytes,
        Array.from({ length: bytes.length }, (_, i) => i),
      ).w;
      const state = (w: StreamWatch) => [w.hasContent, w.complete, w.events, w.problem, w.badEventAt];
      expect(state(whole), pieces.at(-1)!.slice(0, 60)).toEqual(state(byByte));
    }
    // The first and the fourth: four content events (the finish is not one), and the bound.
    expect(perEvent('sse', streams[0][1]).w.events).toBe(4);
    expect(perEvent('sse', streams[3][1]).w.problem).toContain('longer than');
  });

  it('terminators and errors are still seen among routine events', () => {
    const tokens = Array.from({ length: 5 }, (_, i) => chunk({ content: `t${i}` }));
    expect(perEvent('sse', [...sse(...tokens, chunk({}, 'length')), 'data: [DONE]\n\n']).w.complete).toBe(true);
    expect(perEvent('sse', [...sse(...tokens), 'data: {"error":{"message":"overloaded"}}\n\n']).seen.at(-1)).toBe('error');
    expect(perEvent('ndjson', nd({ message: { content: 'a' }, done: false }, { message: { content: 'b' }, done: false }, { done: true })).w.complete).toBe(
      true,
    );
  });
});

describe('the end of the stream', () => {
  it('an NDJSON last line without its newline is read (done: true completes)', () => {
    const { w } = perEvent('ndjson', [`${JSON.stringify({ response: 'a', done: false })}\n`, JSON.stringify({ response: '', done: true })]);
    expect(w.complete).toBe(false);
    expect(w.end()).toBe(true);
  });

  it('an SSE last event without the blank line after it is read, as clients read it', () => {
    const { w } = perEvent('sse', [...sse(chunk({ content: 'a' })), 'data: [DONE]\n']);
    expect(w.complete).toBe(false);
    expect(w.end()).toBe(true);
  });

  it('a stream that just stops is still incomplete at its end', () => {
    expect(perEvent('sse', sse(chunk({ content: 'a' }))).w.end()).toBe(false);
  });
});
