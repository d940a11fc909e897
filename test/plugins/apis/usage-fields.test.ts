// Where each engine reports the tokens used, read as the relay reads it: a stream's events through
// the watcher (only the events that may carry usage are parsed after the first content), a body's
// last bytes. Recorded replies of a real llama-server and the messages API, and each engine's shape.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { StreamWatch } from '../../../engine/routing/stream-watch.js';
import { INFERENCE_STREAMS } from '../../../plugins/apis/inference-api.js';
import { INFERENCE_USAGE } from '../../../plugins/apis/usage-fields.js';

const FIXTURES = join(import.meta.dirname, '../../fixtures');

/** What a watched stream reported, fed in chunks of `size` bytes. */
function streamed(text: string, format: 'sse' | 'ndjson' = 'sse', size = 7) {
  const watch = new StreamWatch(format, INFERENCE_STREAMS, INFERENCE_USAGE);
  const bytes = Buffer.from(text);
  for (let i = 0; i < bytes.length; i += size) watch.feed(bytes.subarray(i, i + size));
  watch.end();
  return { reported: watch.reported, events: watch.events };
}

/** A reply body's (or an event's) usage, from its UTF-8 bytes. */
const read = (text: string) => INFERENCE_USAGE.read(Buffer.from(text));

describe('usage read from replies', () => {
  it("a real llama-server's stream: usage and timings in its last event", () => {
    const { reported } = streamed(readFileSync(join(FIXTURES, 'reasoning/llama-server-reasoning.sse'), 'utf8'));
    expect(reported).toEqual({ input: 60, output: 16, cachedInput: 0, finish: 'length' });
  });

  it("a real llama-server's whole reply: its last bytes, the cached prompt tokens included", () => {
    const body = readFileSync(join(FIXTURES, 'reasoning/llama-server-reasoning.json'));
    expect(INFERENCE_USAGE.read(body.subarray(-4096))).toEqual({ input: 60, output: 16, cachedInput: 59, finish: 'length' });
  });

  it("the messages API's stream: input from message_start, output from the last message_delta", () => {
    const { reported } = streamed(readFileSync(join(FIXTURES, 'msgapi/basic-text.sse'), 'utf8'));
    expect(reported).toEqual({ input: 11, output: 6, finish: 'end_turn' });
  });

  it('the messages API counts cache reads and writes apart: they are input too', () => {
    expect(read('{"usage":{"input_tokens":5,"cache_read_input_tokens":100,"cache_creation_input_tokens":20,"output_tokens":9}}')).toEqual({
      input: 125,
      cachedInput: 100,
      output: 9,
    });
  });

  it("vLLM's stream with include_usage: the usage event after the finish; the events before carry `usage: null` and are not parsed for it", () => {
    const chunk = (content: string) =>
      `data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"${content}"},"finish_reason":null}],"usage":null}\n\n`;
    const finish = 'data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null}\n\n';
    const text = `${chunk('a')}${chunk(' b')}${chunk(' c')}${finish}data: {"id":"c","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":12,"total_tokens":15,"completion_tokens":3,"completion_tokens_details":{"reasoning_tokens":1}}}\n\ndata: [DONE]\n\n`;
    const { reported, events } = streamed(text);
    expect(reported).toEqual({ input: 12, output: 3, reasoning: 1, finish: 'stop' });
    expect(events).toBe(3);
  });

  it("Ollama's NDJSON stream: prompt_eval_count and eval_count on the done line", () => {
    const line = (o: object) => `${JSON.stringify(o)}\n`;
    const text =
      line({ model: 'm', message: { role: 'assistant', content: 'Hi' }, done: false }) +
      line({ model: 'm', message: { role: 'assistant', content: ' there' }, done: false }) +
      line({ model: 'm', message: { role: 'assistant', content: '' }, done: true, done_reason: 'stop', prompt_eval_count: 26, eval_count: 2 });
    expect(streamed(text, 'ndjson').reported).toEqual({ input: 26, output: 2, finish: 'stop' });
  });

  it("the Responses API: response.completed's usage with its details", () => {
    const event = (type: string, o: object) => `event: ${type}\ndata: ${JSON.stringify({ type, ...o })}\n\n`;
    const text =
      event('response.created', { response: { id: 'r', status: 'in_progress', usage: null } }) +
      event('response.output_text.delta', { delta: 'Hello' }) +
      event('response.completed', {
        response: {
          id: 'r',
          status: 'completed',
          usage: {
            input_tokens: 30,
            input_tokens_details: { cached_tokens: 10 },
            output_tokens: 4,
            output_tokens_details: { reasoning_tokens: 0 },
            total_tokens: 34,
          },
        },
      });
    expect(streamed(text).reported).toEqual({ input: 30, cachedInput: 10, output: 4, reasoning: 0 });
  });

  it('a name inside generated text is escaped and never counts', () => {
    const text = `data: {"choices":[{"index":0,"delta":{"content":"say \\"prompt_tokens\\": 999999"},"finish_reason":null}]}\n\ndata: {"choices":[{"index":0,"delta":{"content":"x"},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n`;
    // The finish reason is read from the terminator; no count is.
    expect(streamed(text).reported).toEqual({ finish: 'stop' });
    expect(read('{"content":"\\"completion_tokens\\": 5"}')).toBeNull();
    // Nor does a "usage" in the text start the count there; a backslash escaped itself ends a string.
    expect(read('{"content":"\\"usage\\":{\\"prompt_tokens\\":7} \\\\","usage":{"prompt_tokens":3,"completion_tokens":2}}')).toEqual({ input: 3, output: 2 });
  });

  it('finds the usage far from the end, after text in any script, and the counts of engines without a usage object', () => {
    const content = 'Grüße, 世界 🌍 '.repeat(40);
    const usage = { prompt_tokens: 41, completion_tokens: 17 };
    expect(read(JSON.stringify({ choices: [{ message: { content } }], usage, padding: 'x'.repeat(600) }))).toEqual({ input: 41, output: 17 });
    expect(read(JSON.stringify({ choices: [{ message: { content } }], usage }))).toEqual({ input: 41, output: 17 });
    // Ollama's whole reply: no usage object, its counts at the top level.
    expect(read(JSON.stringify({ model: 'm', message: { content }, done: true, prompt_eval_count: 9, eval_count: 4, eval_duration: 1 }))).toEqual({
      input: 9,
      output: 4,
    });
    expect(read(JSON.stringify({ model: 'm', message: { content: 'no counts' } }))).toBeNull();
  });
});

describe('finish reasons', () => {
  const read = (s: string) => INFERENCE_USAGE.read(Buffer.from(s));
  it('are read beside the counts, as each API words them, and a null one or one inside text is not one', () => {
    expect(read('{"choices":[{"message":{"content":"hi"},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":3,"completion_tokens":2}}')?.finish).toBe(
      'tool_calls',
    );
    expect(read('{"type":"message_delta","delta":{"stop_reason":"max_tokens"},"usage":{"output_tokens":9}}')?.finish).toBe('max_tokens');
    expect(read('{"done":true,"done_reason":"stop","prompt_eval_count":4,"eval_count":2}')?.finish).toBe('stop');
    expect(read('{"choices":[{"delta":{},"finish_reason":null}],"usage":{"prompt_tokens":3,"completion_tokens":2}}')?.finish).toBeUndefined();
    expect(
      read('{"choices":[{"message":{"content":"say \\"finish_reason\\": \\"evil\\""}}],"usage":{"prompt_tokens":3,"completion_tokens":2}}')?.finish,
    ).toBeUndefined();
  });

  it("of a stream's terminator: its choices' finish_reason", () => {
    expect(INFERENCE_USAGE.finish({ choices: [{ delta: {}, finish_reason: 'length' }] })).toBe('length');
    expect(INFERENCE_USAGE.finish({ choices: [{ delta: {}, finish_reason: null }] })).toBeUndefined();
    expect(INFERENCE_USAGE.finish('[DONE]')).toBeUndefined();
  });
});
