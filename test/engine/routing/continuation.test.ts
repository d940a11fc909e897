// The pure parts of stream continuation: which candidates may continue a break, and in what
// order; events read whole however the bytes are split; a watched stream passed on whole events
// at a time; what an answer holds and how a continuation's words join it.
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import type { Endpoint } from '../../../engine/backends/endpoints.js';
import { continuationOrder } from '../../../engine/routing/continuation.js';
import type { Candidate } from '../../../engine/routing/plan.js';
import { EventSplitter, frame } from '../../../engine/routing/stream-events.js';
import { StreamOut } from '../../../engine/routing/stream-out.js';
import { StreamWatch } from '../../../engine/routing/stream-watch.js';
import { INFERENCE_STREAMS } from '../../../plugins/apis/inference-api.js';
import { CHAT } from '../../../plugins/apis/continuation/openai.js';
import { MESSAGES } from '../../../plugins/apis/continuation/messages.js';
import type { AnswerText } from '../../../plugins/apis/continuation/answer.js';

const ep = (name: string, hosted = false) => ({ name, profile: { characteristics: { hosted_service: hosted } } }) as unknown as Endpoint;
const [A, B, C, F] = ['a', 'b', 'c', 'f'].map((n) => ep(n));
const cand = (endpoint: Endpoint, model: string | undefined, group = 0): Candidate => ({ endpoint, model, group, why: group ? 'fallback' : 'requested' });

describe('continuationOrder', () => {
  const plan = [cand(A, undefined), cand(B, undefined), cand(C, undefined), cand(F, 'fallback', 1)];
  it('the same model on the other endpoints first (plan order), then the fallbacks after it', () => {
    expect(continuationOrder(plan, 1, false)).toEqual([0, 2, 3]);
  });
  it('same_model_only leaves the fallbacks out; the endpoint that broke is never in', () => {
    expect(continuationOrder(plan, 0, true)).toEqual([1, 2]);
    expect(continuationOrder(plan, 3, false)).toEqual([]);
  });
  it('a fallback that broke: only its own model elsewhere, and what comes after it', () => {
    const p = [cand(A, undefined), cand(F, 'fb', 1), cand(B, 'fb', 1), cand(C, 'fb2', 2)];
    expect(continuationOrder(p, 1, false)).toEqual([2, 3]);
  });
  it('a hosted service that broke: another model of it after everything else (not with same_model_only)', () => {
    const H = ep('hosted', true);
    const p = [cand(H, 'primary'), cand(H, 'fb', 1), cand(B, 'fb', 1)];
    expect(continuationOrder(p, 0, false)).toEqual([2, 1]);
    expect(continuationOrder(p, 0, true)).toEqual([]);
    // An engine of no service: never the endpoint that broke.
    expect(continuationOrder([cand(A, 'primary'), cand(A, 'fb', 1)], 0, false)).toEqual([]);
  });
});

describe('EventSplitter and frame', () => {
  const events = [
    { name: '', data: '{"a":"é ✓"}' },
    { name: 'content_block_delta', data: '{"b":1}' },
    { name: '', data: 'line one\nline two' },
  ];
  it('reads the same events however the bytes are split, and writes them back as they were', () => {
    const bytes = Buffer.from(
      events
        .map((e) => frame('sse', e))
        .join('')
        .replace(/\n/g, '\r\n')
        .replace('data: {"b', ': keep-alive\r\ndata: {"b'),
    );
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 1, max: bytes.length - 1 }), { maxLength: 8 }), (cuts) => {
        const at = [...new Set(cuts)].sort((x, y) => x - y);
        const s = new EventSplitter('sse');
        const got = [];
        let from = 0;
        for (const c of [...at, bytes.length]) {
          got.push(...s.feed(bytes.subarray(from, c)));
          from = c;
        }
        got.push(...s.end());
        expect(got).toEqual(events);
      }),
    );
  });
  it('NDJSON: a line each, a last line without its newline read at the end', () => {
    const s = new EventSplitter('ndjson');
    expect(s.feed(Buffer.from('{"x":1}\n\n{"y"'))).toEqual([{ name: '', data: '{"x":1}' }]);
    expect(s.end()).toEqual([{ name: '', data: '{"y"' }]);
    expect(frame('ndjson', { name: '', data: '{"y":2}' })).toBe('{"y":2}\n');
  });
  it("llama.cpp's error line is an error event", () => {
    expect(new EventSplitter('sse').feed(Buffer.from('error: {"code":500}\n\n'))).toEqual([{ name: 'error', data: '{"code":500}' }]);
  });
});

describe('a watched stream passed on whole events at a time', () => {
  const sse = (n: number) => `data: {"choices":[{"delta":{"content":"w${n}"}}]}\n\n`;
  it('what goes out ends at an event boundary, whatever the chunks; all of it once complete', () => {
    const stream = Buffer.from(`${[0, 1, 2, 3, 4].map(sse).join('')}data: [DONE]\n\n`);
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 1, max: stream.length - 1 }), { maxLength: 10 }), (cuts) => {
        const watch = new StreamWatch('sse', INFERENCE_STREAMS);
        const out = new StreamOut();
        let sent = '';
        let from = 0;
        for (const c of [...[...new Set(cuts)].sort((x, y) => x - y), stream.length]) {
          const chunk = stream.subarray(from, c);
          from = c;
          watch.feed(chunk);
          out.add(chunk);
          sent += out.take(watch.completeTo)?.toString() ?? '';
          expect(sent === '' || sent.endsWith('\n\n')).toBe(true);
        }
        expect(sent).toBe(stream.toString());
      }),
    );
  });
  it('a chunk that is one whole event goes out as it came (no copy)', () => {
    const chunk = Buffer.from(sse(1));
    const watch = new StreamWatch('sse', INFERENCE_STREAMS);
    const out = new StreamOut();
    watch.feed(chunk);
    out.add(chunk);
    expect(out.take(watch.completeTo)).toBe(chunk);
  });
  it('an error event: where it began, so what came before it goes out and it does not', () => {
    const good = sse(1);
    const chunk = Buffer.from(`${good}data: {"error": {"message": "oom"}}\n\n`);
    const watch = new StreamWatch('sse', INFERENCE_STREAMS);
    expect(watch.feed(chunk)).toBe('error');
    expect(watch.badEventAt).toBe(good.length);
    expect(watch.hasContent).toBe(true);
    const again = new StreamWatch('sse', INFERENCE_STREAMS);
    again.feed(Buffer.from(good.slice(0, 10)));
    expect(again.feed(Buffer.from(`${good.slice(10)}data: {"error": {"message": "oom"}}\n\n`))).toBe('error');
    expect(again.badEventAt).toBe(good.length);
  });
});

describe('what an answer holds, and how a continuation joins it', () => {
  const chat = (delta: object) => ({ name: '', data: JSON.stringify({ id: 'c1', created: 5, choices: [{ index: 0, delta }] }) });
  const read = (events: { name: string; data: string }[], api = CHAT) => {
    const t = api.transcript() as AnswerText;
    events.forEach((e) => t.read(e));
    return t;
  };

  it('chat: the text; a tool call or reasoning alone cannot be continued', () => {
    const t = read([chat({ role: 'assistant', content: '' }), chat({ content: 'Hello ' }), chat({ content: 'world ' })]);
    expect(t.text).toBe('Hello world ');
    expect(t.prefill).toBe('Hello world');
    expect(t.used).toBe(2);
    expect(t.blocker()).toBeNull();
    expect(read([chat({ content: 'x' }), chat({ tool_calls: [{ index: 0, function: { arguments: '{"a' } }] })]).blocker()).toMatch(/tool call/);
    expect(read([chat({ reasoning_content: 'thinking' })]).blocker()).toMatch(/reasoning/);
    expect(read([chat({ role: 'assistant' })]).blocker()).toMatch(/no answer text/);
  });

  it('a continuation: its opening dropped, the id the client saw, the prefill it repeats and the whitespace the client has taken off', () => {
    const t = read([chat({ role: 'assistant', content: '' }), chat({ content: 'Hello ' })]);
    const splice = t.splicer();
    const cont = (delta: object, finish: string | null = null) =>
      splice({ name: '', data: JSON.stringify({ id: 'other', created: 9, choices: [{ index: 0, delta, finish_reason: finish }] }) })!;
    expect(cont({ role: 'assistant', content: '' })).toEqual([]);
    expect(cont({ content: 'Hel' })).toEqual([]); // may still be the prefill repeated
    const [joined] = cont({ content: 'lo world' });
    expect(JSON.parse(joined.data)).toMatchObject({ id: 'c1', created: 5, choices: [{ delta: { content: 'world' } }] });
    expect(JSON.parse(cont({}, 'stop')[0].data).choices[0].finish_reason).toBe('stop');
  });

  it('a restart (the answer asked for again without a prefill): held until it has repeated what the client has, exactly; null once it differs', () => {
    const t = read([chat({ role: 'assistant', content: '' }), chat({ content: 'Hello ' }), chat({ content: 'world' })]);
    const piece = (splice: ReturnType<typeof t.splicer>, content: string) =>
      splice({ name: '', data: JSON.stringify({ id: 'other', created: 9, choices: [{ index: 0, delta: { content } }], usage: null }) });
    const same = t.splicer(true);
    expect(piece(same, 'Hello')).toEqual([]);
    expect(piece(same, ' wor')).toEqual([]);
    const [rest] = piece(same, 'ld, and more')!;
    expect(JSON.parse(rest.data)).toMatchObject({ id: 'c1', choices: [{ delta: { content: ', and more' } }] });
    // Shorter than what the client has: its end never goes out (it would finish a cut answer).
    const short = t.splicer(true);
    expect(piece(short, 'Hello')).toEqual([]);
    expect(short({ name: '', data: JSON.stringify({ id: 'o', choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] }) })).toEqual([]);
    const other = t.splicer(true);
    expect(piece(other, 'Hello')).toEqual([]);
    expect(piece(other, ' there')).toBeNull();
    expect(piece(other, 'world')).toBeNull();
  });

  it('the messages API: a continuation joins the open text block, or follows a closed one', () => {
    const ev = (type: string, rest: object) => ({ name: type, data: JSON.stringify({ type, ...rest }) });
    const open = [
      ev('message_start', { message: {} }),
      ev('content_block_start', { index: 0, content_block: { type: 'text', text: '' } }),
      ev('content_block_delta', { index: 0, delta: { type: 'text_delta', text: 'Hi there' } }),
    ];
    const contEvents = [
      ev('message_start', { message: {} }),
      ev('ping', {}),
      ev('content_block_start', { index: 0, content_block: { type: 'text', text: '' } }),
      ev('content_block_delta', { index: 0, delta: { type: 'text_delta', text: ' friend' } }),
      ev('content_block_stop', { index: 0 }),
    ];
    const opened = read(open, MESSAGES).splicer();
    const joinOpen = (e: { name: string; data: string }) => opened(e)!;
    expect(contEvents.flatMap(joinOpen).map((e) => JSON.parse(e.data))).toEqual([
      { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: ' friend' } },
      { type: 'content_block_stop', index: 0 },
    ]);
    const closed = read([...open, ev('content_block_stop', { index: 0 })], MESSAGES).splicer();
    const joinClosed = (e: { name: string; data: string }) => closed(e)!;
    expect(contEvents.flatMap(joinClosed).map((e) => JSON.parse(e.data).index)).toEqual([1, 1, 1]);
    const thinking = read(
      [
        ev('content_block_start', { index: 0, content_block: { type: 'thinking' } }),
        ev('content_block_delta', { index: 0, delta: { type: 'thinking_delta', thinking: 'hm' } }),
      ],
      MESSAGES,
    );
    expect(thinking.blocker()).toMatch(/reasoning|thinking/);
  });
});
