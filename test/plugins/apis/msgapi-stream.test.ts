// The stream translator against the recorded fixtures: event names, order, index numbering.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { StreamTranslator } from '../../../plugins/apis/msgapi/stream.js';

type Event = { event: string; data: any };

function parse(text: string): Event[] {
  return text
    .split('\n\n')
    .filter((f) => f.trim())
    .map((frame) => {
      const event = /^event: (.*)$/m.exec(frame)![1];
      return { event, data: JSON.parse(/^data: (.*)$/m.exec(frame)![1]) };
    });
}

const fixture = (name: string) => parse(readFileSync(`test/fixtures/msgapi/${name}`, 'utf8'));
const chunk = (delta: object, finish: string | null = null, extra: object = {}) =>
  `data: ${JSON.stringify({ object: 'chat.completion.chunk', choices: [{ index: 0, delta, finish_reason: finish }], ...extra })}\n\n`;

/** Run a chat SSE body through the translator, cut into pieces of `size` bytes. */
function translate(body: string, size = 13, o = { model: 'm', inputTokens: 11 }) {
  const t = new StreamTranslator(o);
  let out = t.start('msg_01test');
  const bytes = Buffer.from(body);
  for (let i = 0; i < bytes.length; i += size) out += t.feed(bytes.subarray(i, i + size));
  out += t.end();
  return { events: parse(out), translator: t };
}

const shape = (events: Event[]) => events.map((e) => [e.event, e.data.index ?? null, e.data.content_block?.type ?? e.data.delta?.type ?? null]);

describe('stream translation', () => {
  it('gives the event sequence of a recorded text stream', () => {
    const body = `${chunk({ role: 'assistant', content: '' }) + chunk({ content: 'Hello' }) + chunk({ content: ' there' }) + chunk({ content: '!' }) + chunk({}, 'stop')}data: [DONE]\n\n`;
    const { events } = translate(body);
    expect(shape(events)).toEqual(shape(fixture('basic-text.sse')));
    expect(
      events
        .filter((e) => e.event === 'content_block_delta')
        .map((e) => e.data.delta.text)
        .join(''),
    ).toBe('Hello there!');
    expect(events.at(-2)!.data).toEqual({ type: 'message_delta', delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: 3 } });
  });

  it('gives the event sequence of a recorded text-then-tool-use stream, arguments buffered whole', () => {
    const args = '{"location": "Paris"}';
    const body =
      chunk({ role: 'assistant', content: '' }) +
      chunk({ content: 'I' }) +
      chunk({ content: "'ll check the current weather in Paris for you." }) +
      chunk({ tool_calls: [{ index: 0, id: 'toolu_01NRLabsLyVHZPKxbKvkfSMn', type: 'function', function: { name: 'get_weather', arguments: '' } }] }) +
      chunk({ tool_calls: [{ index: 0, function: { arguments: args.slice(0, 8) } }] }) +
      chunk({ tool_calls: [{ index: 0, function: { arguments: args.slice(8) } }] }) +
      chunk({}, 'tool_calls') +
      `data: ${JSON.stringify({ choices: [], usage: { prompt_tokens: 377, completion_tokens: 65 } })}\n\n` +
      'data: [DONE]\n\n';
    const { events } = translate(body, 17);
    const recorded = fixture('text-then-tool-use.sse');
    // The recording streams the arguments in pieces; the translator sends them complete, in one delta.
    const collapse = (list: Event[]) => shape(list).filter((s, i, all) => !(s[2] === 'input_json_delta' && all[i + 1]?.[2] === 'input_json_delta'));
    expect(collapse(events)).toEqual(collapse(recorded));
    const toolStart = events.find((e) => e.data.content_block?.type === 'tool_use')!;
    expect(toolStart.data).toEqual(recorded.find((e) => e.data.content_block?.type === 'tool_use')!.data);
    expect(JSON.parse(events.find((e) => e.data.delta?.type === 'input_json_delta')!.data.delta.partial_json)).toEqual({ location: 'Paris' });
    expect(events.at(-2)!.data).toEqual({
      type: 'message_delta',
      delta: { stop_reason: 'tool_use', stop_sequence: null },
      usage: { output_tokens: 65, input_tokens: 377 },
    });
  });

  it('has every frame name its data type', () => {
    const { events } = translate(`${chunk({ content: 'a' }) + chunk({}, 'length')}data: [DONE]\n\n`, 3);
    for (const e of events) expect(e.event).toBe(e.data.type);
    expect(events.at(-2)!.data.delta.stop_reason).toBe('max_tokens');
  });

  it('still yields message_start … message_stop for an empty stream', () => {
    const { events } = translate('data: [DONE]\n\n');
    expect(events.map((e) => e.event)).toEqual(['message_start', 'message_delta', 'message_stop']);
    const ended = translate('');
    expect(ended.events.map((e) => e.event)).toEqual(['message_start', 'message_delta', 'message_stop']);
  });

  it('closes a block when the stream switches between thinking and text', () => {
    const { events } = translate(`${chunk({ reasoning_content: 'hmm' }) + chunk({ content: 'yes' }) + chunk({}, 'stop')}data: [DONE]\n\n`);
    expect(shape(events)).toEqual([
      ['message_start', null, null],
      ['content_block_start', 0, 'thinking'],
      ['ping', null, null],
      ['content_block_delta', 0, 'thinking_delta'],
      ['content_block_stop', 0, null],
      ['content_block_start', 1, 'text'],
      ['content_block_delta', 1, 'text_delta'],
      ['content_block_stop', 1, null],
      ['message_delta', null, null],
      ['message_stop', null, null],
    ]);
  });

  it('skips and counts malformed chunks, survives a line over 1 MiB, and keeps multi-byte characters whole', () => {
    const body = `${chunk({ content: 'héllo ✓' })}data: {not json\n\ndata: ${'x'.repeat(1024 * 1024 + 10)}\n\n${chunk({ content: ' done' })}data: [DONE]\n\n`;
    const { events, translator } = translate(body, 5);
    expect(
      events
        .filter((e) => e.event === 'content_block_delta')
        .map((e) => e.data.delta.text)
        .join(''),
    ).toBe('héllo ✓ done');
    expect(translator.malformed).toBe(2);
  });

  it('ends with an error event when the backend fails mid-stream', () => {
    const t = new StreamTranslator({ model: 'm', inputTokens: 1 });
    t.start();
    t.feed(Buffer.from(chunk({ content: 'partial' })));
    const err = parse(t.fail('the backend stream failed: ECONNRESET'));
    expect(err).toEqual([{ event: 'error', data: { type: 'error', error: { type: 'api_error', message: 'the backend stream failed: ECONNRESET' } } }]);
    expect(t.end()).toBe('');
  });
});
