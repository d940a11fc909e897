// Chat-completions reply → messages reply: each mapping of the spec.
import { describe, expect, it } from 'vitest';
import { errorReply, isMessagesError, stopReason, toMessage } from '../../../plugins/apis/msgapi/response.js';

const reply = (message: object, finish = 'stop', extra: object = {}) => ({
  model: 'backend-model',
  choices: [{ index: 0, message, finish_reason: finish, ...extra }],
  usage: { prompt_tokens: 11, completion_tokens: 6 },
});

describe('reply translation', () => {
  it('makes a message with text, the stop reason and usage', () => {
    const m = toMessage(reply({ role: 'assistant', content: 'Hello there!' }), { model: 'm', inputTokens: 3 });
    expect(m.id).toMatch(/^msg_01[0-9A-Za-z]{22}$/);
    expect(m).toMatchObject({
      type: 'message',
      role: 'assistant',
      model: 'backend-model',
      content: [{ type: 'text', text: 'Hello there!' }],
      stop_reason: 'end_turn',
      stop_sequence: null,
      usage: { input_tokens: 11, output_tokens: 6 },
    });
  });

  it('turns tool calls into tool_use blocks with parsed input', () => {
    const m = toMessage(
      reply(
        { content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"location":"Paris"}' } }] },
        'tool_calls',
      ),
      { model: 'm', inputTokens: 0 },
    );
    expect(m.content).toEqual([{ type: 'tool_use', id: 'call_1', name: 'get_weather', input: { location: 'Paris' } }]);
    expect(m.stop_reason).toBe('tool_use');
  });

  it('turns reasoning into a thinking block before the text', () => {
    const m = toMessage(reply({ content: '42', reasoning_content: 'let me think' }), { model: 'm', inputTokens: 0 });
    expect(m.content).toEqual([
      { type: 'thinking', thinking: 'let me think', signature: '' },
      { type: 'text', text: '42' },
    ]);
  });

  it('estimates usage as characters / 4 when the backend gives none', () => {
    const m = toMessage({ choices: [{ message: { content: 'x'.repeat(40) }, finish_reason: 'stop' }] }, { model: 'asked', inputTokens: 9 });
    expect(m.usage).toEqual({ input_tokens: 9, output_tokens: 10 });
    expect(m.model).toBe('asked');
  });

  it.each([
    ['stop', undefined, 'end_turn', null],
    ['length', undefined, 'max_tokens', null],
    ['tool_calls', undefined, 'tool_use', null],
    ['stop', '\n\nHuman:', 'stop_sequence', '\n\nHuman:'],
    ['stop', 'not-requested', 'end_turn', null],
  ])('maps finish_reason %s (matched %j) to %s', (finish, matched, reason, sequence) => {
    expect(stopReason(finish, matched, ['\n\nHuman:'], false)).toEqual({ reason, sequence });
  });
});

describe('backend errors', () => {
  it('take the messages API error shape with a type for the status', () => {
    expect(errorReply(404, JSON.stringify({ error: { message: 'model "x" not found', type: 'invalid_request_error' } }))).toEqual({
      type: 'error',
      error: { type: 'not_found_error', message: 'model "x" not found' },
    });
    expect(errorReply(500, 'upstream exploded')).toEqual({ type: 'error', error: { type: 'api_error', message: 'upstream exploded' } });
    expect(errorReply(429, '{"error":"slow down"}').error).toEqual({ type: 'rate_limit_error', message: 'slow down' });
  });

  it.each([
    [400, 'invalid_request_error'],
    [401, 'authentication_error'],
    [403, 'permission_error'],
    [404, 'not_found_error'],
    [413, 'request_too_large'],
    [429, 'rate_limit_error'],
    [500, 'api_error'],
    [529, 'overloaded_error'],
    [501, 'api_error'],
    [502, 'api_error'],
    [503, 'api_error'],
    [422, 'invalid_request_error'],
  ])('name status %i as the messages API does: %s', (status, type) => {
    expect(errorReply(status, '{"error":{"code":1,"message":"m","type":"server_error"}}').error).toEqual({ type, message: 'm' });
  });

  it('clip a long text body', () => {
    expect(errorReply(502, 'x'.repeat(10_000)).error.message).toHaveLength(2000);
  });

  it('are recognised when already in the messages API shape', () => {
    expect(isMessagesError('{"type":"error","error":{"type":"overloaded_error","message":"busy"}}')).toBe(true);
    expect(isMessagesError('{"error":{"code":500,"message":"boom","type":"server_error"}}')).toBe(false);
    expect(isMessagesError('{"type":"error","error":"boom"}')).toBe(false);
    expect(isMessagesError('Internal Server Error')).toBe(false);
  });
});
