// Resilience, part 2: streams. A slow first token and a stall before any content are rescued by
// the next candidate (first_token_timeout; a role-only chunk is not content); a stream that broke
// after content reached the client — cut, stalled, malformed, an error event, no terminator —
// ends with an in-stream error in its own format (SSE `data: {"error":…}`, an NDJSON
// `{"error":…}` line), which the official client raises, and is counted and logged as failed:
// never a truncated success, never spliced with another model's answer. A content_filter or
// length finish is an answer: passed through, counted a success, not retried.
// Each with one endpoint and with a fallback chain (primary-model → fallback-model).
import { afterEach, describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import {
  accessLines,
  chatBody,
  expectCountedFailed,
  expectCountedSuccess,
  ndjsonLines,
  openaiStream,
  rig,
  send,
  sseContent,
  statistics,
  SUCCESS_OUTCOME,
  type Rig,
  type RigOptions,
  type Topology,
} from '../../helpers/resilience.js';
import { waitFor } from '../../helpers/wait.js';

let r: Rig | null = null;
afterEach(async () => {
  await r?.close();
  r = null;
});

const TEXT = 'one two three four five';
/** A first token this late is the fault under test: the deadlines set here are 1 s, and a
 *  gateway that waited it out fails on what it answered (not on a test timeout). */
const SLOW_MS = 20_000;
/** A rig whose providers answer TEXT. */
async function streamRig(topology: Topology, opts: RigOptions = {}): Promise<Rig> {
  const made = await rig(topology, opts);
  made.primary.text = TEXT;
  if (made.other) made.other.text = `${TEXT} (fallback)`;
  return made;
}

/** The raw SSE reply ended with an in-stream error, without [DONE] and without a finish_reason. */
function expectSseError(text: string): any {
  const { last, done } = sseContent(text);
  expect(done).toBe(false);
  const err = JSON.parse(last!);
  expect(err.error).toBeDefined();
  expect(text).not.toMatch(/"finish_reason":"(stop|length)"/);
  return err.error;
}

/** The raw NDJSON reply ended with an {"error": …} line and no done:true. */
function expectNdjsonError(text: string): any {
  const lines = ndjsonLines(text.replace(/^\{"model": "this is not json\n/m, ''));
  expect(lines.some((l) => l.done === true)).toBe(false);
  expect(typeof lines.at(-1).error).toBe('string');
  return lines.at(-1).error;
}

describe('a slow first token', () => {
  it('one endpoint: a role-only chunk and then nothing past first_token_timeout — abandoned, cancelled upstream, sent again, answered', async () => {
    r = await streamRig('one endpoint', { proxy: { first_token_timeout: '1s' } });
    r.primary.script({ stream: { roleOnlyThenStallMs: SLOW_MS } });
    const s = await openaiStream(r);
    expect(s.error).toBeUndefined();
    expect(s.text).toBe(TEXT);
    expect(s.finish).toBe('stop');
    expect(r.primary.generations).toHaveLength(2);
    await waitFor(() => r!.primary.aborted === 1, 'the slow attempt to be cancelled upstream');
  });

  it('one endpoint: a slow head, with the deadline set per request by X-Gw-First-Token-Timeout', async () => {
    r = await streamRig('one endpoint');
    r.primary.script({ ok: { firstTokenDelayMs: SLOW_MS } });
    const s = await openaiStream(r, { 'X-Gw-First-Token-Timeout': '1s' });
    expect(s.error).toBeUndefined();
    expect(s.text).toBe(TEXT);
    expect(r.primary.generations).toHaveLength(2);
  });

  it('one endpoint, always slow: an error the client raises, no text, counted failed, within the budget', async () => {
    r = await streamRig('one endpoint', { proxy: { first_token_timeout: '1s', max_retries: 1, retry: { budget: '4s' } } });
    r.primary.always({ stream: { roleOnlyThenStallMs: SLOW_MS } });
    const before = await statistics(r);
    const s = await openaiStream(r);
    expect(s.error).toBeInstanceOf(OpenAI.APIError);
    expect(s.text).toBe('');
    expect(r.primary.generations.length).toBeLessThanOrEqual(2);
    await expectCountedFailed(r, before.requests_failed);
  });

  it('fallback chain: the fallback model answers; the access log names the first-token timeout', async () => {
    r = await streamRig('fallback chain', { proxy: { first_token_timeout: '1s' } });
    r.primary.always({ stream: { roleOnlyThenStallMs: SLOW_MS } });
    const s = await openaiStream(r);
    expect(s.error).toBeUndefined();
    expect(s.text).toBe(`${TEXT} (fallback)`);
    expect(r.other!.generations.map((g) => g.model)).toEqual(['fallback-model']);
    const line = await waitFor(() => accessLines(r!).at(-1), 'the access log line');
    expect(line.tried[0]).toMatchObject({ endpoint: 'primary', model: 'primary-model' });
    expect(String(line.tried[0].outcome)).toMatch(/first_token/);
    await waitFor(() => r!.primary.aborted >= 1, 'the slow attempt to be cancelled upstream');
  });

  it('fallback chain, NDJSON (localrunner api/chat): the fallback model answers', async () => {
    r = await streamRig('fallback chain', { mode: 'ndjson', proxy: { first_token_timeout: '1s' } });
    r.primary.always({ stream: { roleOnlyThenStallMs: SLOW_MS } });
    const reply = await send(r, chatBody(true));
    expect(reply.status).toBe(200);
    const lines = ndjsonLines(reply.text);
    expect(lines.map((l) => l.message?.content ?? '').join('')).toBe(`${TEXT} (fallback)`);
    expect(lines.at(-1)).toMatchObject({ done: true });
  });
});

describe('a slow first token on a model that is not loaded (a cold load is not a stall)', () => {
  const COLD = { first_token_timeout: '1s', cold_first_token_timeout: '60s' };

  it('one endpoint, NDJSON: a model api/ps does not list gets cold_first_token_timeout and is waited for', async () => {
    r = await streamRig('one endpoint', { mode: 'ndjson', proxy: COLD, primaryModels: [{ name: 'primary-model', context: 8192, loaded: false }] });
    r.primary.script({ stream: { roleOnlyThenStallMs: 3_000 } });
    const reply = await send(r, chatBody(true));
    expect(
      ndjsonLines(reply.text)
        .map((l) => l.message?.content ?? '')
        .join(''),
    ).toBe(TEXT);
    expect(r.primary.generations).toHaveLength(1);
  });

  it('one endpoint, NDJSON: the same stall on a loaded model is abandoned at first_token_timeout and sent again', async () => {
    r = await streamRig('one endpoint', { mode: 'ndjson', proxy: COLD });
    r.primary.script({ stream: { roleOnlyThenStallMs: SLOW_MS } });
    const reply = await send(r, chatBody(true));
    expect(
      ndjsonLines(reply.text)
        .map((l) => l.message?.content ?? '')
        .join(''),
    ).toBe(TEXT);
    expect(r.primary.generations).toHaveLength(2);
  });
});

describe('a stream cut mid-way', () => {
  it('one endpoint: ends with an in-stream error the openai client raises; not sent again; counted and logged failed', async () => {
    r = await streamRig('one endpoint');
    r.primary.always({ stream: { cutAfter: 2 } });
    const before = await statistics(r);
    const s = await openaiStream(r);
    expect(s.error).toBeInstanceOf(OpenAI.APIError);
    expect(s.text).toBe('one two');
    expect(r.primary.generations).toHaveLength(1);
    await expectCountedFailed(r, before.requests_failed);
    const raw = await send(r, chatBody(true));
    expect(raw.status).toBe(200);
    expectSseError(raw.text);
  });

  it('one endpoint, NDJSON: ends with an {"error": …} line, no done:true', async () => {
    r = await streamRig('one endpoint', { mode: 'ndjson' });
    r.primary.always({ stream: { cutAfter: 2 } });
    const before = await statistics(r);
    const reply = await send(r, chatBody(true));
    expectNdjsonError(reply.text);
    await expectCountedFailed(r, before.requests_failed);
  });

  it('fallback chain, after content: the same error — never spliced with the fallback’s answer', async () => {
    r = await streamRig('fallback chain');
    r.primary.always({ stream: { cutAfter: 2 } });
    const before = await statistics(r);
    const reply = await send(r, chatBody(true));
    expectSseError(reply.text);
    expect(sseContent(reply.text).content).toBe('one two');
    expect(r.other!.generations).toHaveLength(0);
    await expectCountedFailed(r, before.requests_failed);
  });

  it('fallback chain, cut before any content (after the role chunk): the fallback model answers', async () => {
    r = await streamRig('fallback chain');
    r.primary.always({ stream: { cutAfter: 0 } });
    const s = await openaiStream(r);
    expect(s.error).toBeUndefined();
    expect(s.text).toBe(`${TEXT} (fallback)`);
  });
});

describe('a stream that stalls', () => {
  // Before content the stall outlasts first_token_timeout (1s) but not stream_idle_timeout (10s),
  // so a gateway without the first-token deadline fails on its answer, not on the test's timeout.
  it('one endpoint, before content: first_token_timeout abandons it, the endpoint is asked again and answers', async () => {
    r = await streamRig('one endpoint', { proxy: { first_token_timeout: '1s', stream_idle_timeout: '10s' } });
    r.primary.script({ stream: { stallAfter: 0 } });
    const s = await openaiStream(r);
    expect(s.error).toBeUndefined();
    expect(s.text).toBe(TEXT);
    await waitFor(() => r!.primary.aborted === 1, 'the stalled attempt to be cancelled upstream');
  });

  it('fallback chain, before content: the fallback model answers', async () => {
    r = await streamRig('fallback chain', { proxy: { first_token_timeout: '1s', stream_idle_timeout: '10s' } });
    r.primary.always({ stream: { stallAfter: 0 } });
    const s = await openaiStream(r);
    expect(s.error).toBeUndefined();
    expect(s.text).toBe(`${TEXT} (fallback)`);
  });

  it('one endpoint, after content: stream_idle_timeout ends it with an in-stream error naming the setting, cancelled upstream, counted failed', async () => {
    r = await streamRig('one endpoint', { proxy: { first_token_timeout: '1s', stream_idle_timeout: '1s' } });
    r.primary.always({ stream: { stallAfter: 2 } });
    const before = await statistics(r);
    const s = await openaiStream(r);
    expect(s.error).toBeInstanceOf(OpenAI.APIError);
    expect(String(s.error.message)).toContain('proxy.stream_idle_timeout');
    expect(s.text).toBe('one two');
    expect(r.primary.generations).toHaveLength(1);
    await waitFor(() => r!.primary.aborted === 1, 'the stalled stream to be cancelled upstream');
    await expectCountedFailed(r, before.requests_failed);
  });

  it('fallback chain, after content: the same error, the fallback never asked', async () => {
    r = await streamRig('fallback chain', { proxy: { stream_idle_timeout: '1s' } });
    r.primary.always({ stream: { stallAfter: 2 } });
    const reply = await send(r, chatBody(true));
    expect(expectSseError(reply.text).message).toContain('proxy.stream_idle_timeout');
    expect(r.other!.generations).toHaveLength(0);
  });

  it('one endpoint, NDJSON, after content: an {"error": …} line naming the setting', async () => {
    r = await streamRig('one endpoint', { mode: 'ndjson', proxy: { stream_idle_timeout: '1s' } });
    r.primary.always({ stream: { stallAfter: 2 } });
    const reply = await send(r, chatBody(true));
    expect(expectNdjsonError(reply.text)).toContain('proxy.stream_idle_timeout');
  });
});

describe('a malformed chunk', () => {
  it('one endpoint: the stream ends with an in-stream error at the malformed chunk, no [DONE]; counted and logged failed', async () => {
    r = await streamRig('one endpoint');
    r.primary.always({ stream: { malformedAt: 2 } });
    const before = await statistics(r);
    const reply = await send(r, chatBody(true));
    expect(reply.status).toBe(200);
    expectSseError(reply.text);
    // Nothing after the malformed chunk is presented as the answer.
    expect(sseContent(reply.text).content).toBe('one two');
    await expectCountedFailed(r, before.requests_failed);
    const s = await openaiStream(r);
    expect(s.error).toBeInstanceOf(Error);
  });

  it('one endpoint, NDJSON: an {"error": …} line, no done:true', async () => {
    r = await streamRig('one endpoint', { mode: 'ndjson' });
    r.primary.always({ stream: { malformedAt: 2 } });
    const before = await statistics(r);
    const reply = await send(r, chatBody(true));
    expectNdjsonError(reply.text);
    await expectCountedFailed(r, before.requests_failed);
  });

  it('fallback chain, after content: the same error, the fallback never asked', async () => {
    r = await streamRig('fallback chain');
    r.primary.always({ stream: { malformedAt: 2 } });
    const reply = await send(r, chatBody(true));
    expectSseError(reply.text);
    expect(r.other!.generations).toHaveLength(0);
  });
});

describe('an error event mid-stream', () => {
  it('one endpoint: passed on in the stream, the openai client raises it; counted failed', async () => {
    r = await streamRig('one endpoint');
    r.primary.always({ stream: { errorAt: 2 } });
    const before = await statistics(r);
    const s = await openaiStream(r);
    expect(s.error).toBeInstanceOf(OpenAI.APIError);
    expect(s.text).toBe('one two');
    await expectCountedFailed(r, before.requests_failed);
  });

  it('fallback chain: the same, the fallback never asked', async () => {
    r = await streamRig('fallback chain');
    r.primary.always({ stream: { errorAt: 2 } });
    const s = await openaiStream(r);
    expect(s.error).toBeInstanceOf(OpenAI.APIError);
    expect(r.other!.generations).toHaveLength(0);
  });
});

describe('a stream without its terminator', () => {
  it('one endpoint, SSE: every chunk, then an in-stream error instead of a quiet end; the openai client raises; counted failed', async () => {
    r = await streamRig('one endpoint');
    r.primary.always({ stream: { noTerminator: true } });
    const before = await statistics(r);
    const s = await openaiStream(r);
    expect(s.text).toBe(TEXT);
    expect(s.error).toBeInstanceOf(OpenAI.APIError);
    await expectCountedFailed(r, before.requests_failed);
    const raw = await send(r, chatBody(true));
    expectSseError(raw.text);
  });

  it('one endpoint, NDJSON without done:true: an {"error": …} line at the end; counted failed', async () => {
    r = await streamRig('one endpoint', { mode: 'ndjson' });
    r.primary.always({ stream: { noTerminator: true } });
    const before = await statistics(r);
    const reply = await send(r, chatBody(true));
    expect(
      ndjsonLines(reply.text)
        .map((l) => l.message?.content ?? '')
        .join(''),
    ).toBe(TEXT);
    expectNdjsonError(reply.text);
    await expectCountedFailed(r, before.requests_failed);
  });

  it('fallback chain: the same error, the fallback never asked', async () => {
    r = await streamRig('fallback chain');
    r.primary.always({ stream: { noTerminator: true } });
    const reply = await send(r, chatBody(true));
    expectSseError(reply.text);
    expect(r.other!.generations).toHaveLength(0);
  });
});

describe('a content-filter finish', () => {
  it('one endpoint: passed through faithfully (stream and JSON), counted a success, not retried', async () => {
    r = await streamRig('one endpoint');
    r.primary.always({ ok: { finish: 'content_filter', text: 'one two' } });
    const before = await statistics(r);
    const s = await openaiStream(r);
    expect(s.error).toBeUndefined();
    expect(s.text).toBe('one two');
    expect(s.finish).toBe('content_filter');
    await expectCountedSuccess(r, before.requests_failed, before.requests_total);
    const raw = await send(r, chatBody(true));
    expect(sseContent(raw.text).done).toBe(true);
    const json = await send(r, chatBody(false));
    expect(json.status).toBe(200);
    expect(json.json.choices[0].finish_reason).toBe('content_filter');
    expect(r.primary.generations).toHaveLength(3);
    const line = await waitFor(() => accessLines(r!).at(-1), 'the access log line');
    expect(line.status).toBe(200);
    expect(line.tried ?? []).toEqual([]);
  });

  it('one endpoint: a length finish is an answer too', async () => {
    r = await streamRig('one endpoint');
    r.primary.always({ ok: { finish: 'length' } });
    const s = await openaiStream(r);
    expect(s.error).toBeUndefined();
    expect(s.finish).toBe('length');
    expect(r.primary.generations).toHaveLength(1);
  });

  it('fallback chain: the primary’s filtered answer is the answer — the fallback never asked', async () => {
    r = await streamRig('fallback chain');
    r.primary.always({ ok: { finish: 'content_filter', text: 'one two' } });
    const before = await statistics(r);
    const s = await openaiStream(r);
    expect(s.error).toBeUndefined();
    expect(s.finish).toBe('content_filter');
    expect(s.text).toBe('one two');
    expect(r.other!.generations).toHaveLength(0);
    await expectCountedSuccess(r, before.requests_failed, before.requests_total);
    const json = await send(r, chatBody(false));
    expect(json.json.choices[0].finish_reason).toBe('content_filter');
    expect(json.headers['x-gw-routing-decision']).not.toBe('fallback');
    expect(json.headers['x-gw-attempts']).toBe('1');
  });
});

describe('accounting of a stream rescued by the fallback', () => {
  it('the failed attempt is in tried with its outcome; the answering one is not', async () => {
    r = await streamRig('fallback chain');
    r.primary.always({ status: 503 });
    const reply = await send(r, chatBody(true));
    expect(reply.status).toBe(200);
    // The requested model twice (its one retry), then the fallback.
    expect(reply.headers['x-gw-attempts']).toBe('3');
    expect(reply.headers['x-gw-routing-decision']).toBe('fallback');
    expect(reply.headers['x-gw-model']).toBe('fallback-model');
    expect(sseContent(reply.text).done).toBe(true);
    const line = await waitFor(() => accessLines(r!).at(-1), 'the access log line');
    expect(line.tried).toHaveLength(2);
    for (const t of line.tried) {
      expect(String(t.outcome)).toContain('503');
      expect(String(t.outcome)).not.toMatch(SUCCESS_OUTCOME);
    }
  });
});
