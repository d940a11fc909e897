// Messages request → chat-completions request: each mapping of the spec.
import { describe, expect, it } from 'vitest';
import { estimateInputTokens, invalidReason, toChatRequest } from '../../plugins/lib/msgapi/request.js';
import type { MessagesRequest } from '../../plugins/lib/msgapi/types.js';

const base: MessagesRequest = { model: 'm', max_tokens: 100, messages: [{ role: 'user', content: 'hi' }] };
const chat = (req: Partial<MessagesRequest>, o: Partial<Parameters<typeof toChatRequest>[1]> = {}) =>
  toChatRequest({ ...base, ...req } as MessagesRequest, { model: 'real', topK: false, streamUsage: false, ...o });

describe('request translation', () => {
  it('puts the system prompt (string or text blocks) first, as role system', () => {
    expect(chat({ system: 'be brief' }).messages).toEqual([{ role: 'system', content: 'be brief' }, { role: 'user', content: 'hi' }]);
    expect((chat({ system: [{ type: 'text', text: 'a' }, { type: 'text', text: 'b' }] }).messages as any[])[0]).toEqual({ role: 'system', content: 'a\nb' });
  });

  it('sends the resolved model, max_tokens, sampling and stop sequences', () => {
    const c = chat({ temperature: 0.3, top_p: 0.9, top_k: 40, stop_sequences: ['\n\nHuman:'] });
    expect(c).toMatchObject({ model: 'real', max_tokens: 100, temperature: 0.3, top_p: 0.9, stop: ['\n\nHuman:'] });
    expect(c.top_k).toBeUndefined();
    expect(chat({ top_k: 40 }, { topK: true }).top_k).toBe(40);
  });

  it('asks for usage in streams where the backend supports it', () => {
    expect(chat({ stream: true }, { streamUsage: true })).toMatchObject({ stream: true, stream_options: { include_usage: true } });
    expect(chat({ stream: true }).stream_options).toBeUndefined();
    expect(chat({}).stream).toBeUndefined();
  });

  it('turns text and image blocks into multi-part content with data URLs', () => {
    const c = chat({ messages: [{ role: 'user', content: [{ type: 'text', text: 'what is this?' }, { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'iVBOR' } }] }] });
    expect((c.messages as any[])[0]).toEqual({ role: 'user', content: [{ type: 'text', text: 'what is this?' }, { type: 'image_url', image_url: { url: 'data:image/png;base64,iVBOR' } }] });
  });

  it('turns tool_use into assistant tool_calls and tool_result into tool messages', () => {
    const c = chat({
      messages: [
        { role: 'user', content: 'weather in Paris?' },
        { role: 'assistant', content: [{ type: 'text', text: 'Checking.' }, { type: 'tool_use', id: 'toolu_1', name: 'get_weather', input: { location: 'Paris' } }] },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: [{ type: 'text', text: '18°C' }] }, { type: 'text', text: 'thanks' }] },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_2', content: 'boom', is_error: true }] },
      ],
    });
    expect(c.messages).toEqual([
      { role: 'user', content: 'weather in Paris?' },
      { role: 'assistant', content: 'Checking.', tool_calls: [{ id: 'toolu_1', type: 'function', function: { name: 'get_weather', arguments: '{"location":"Paris"}' } }] },
      { role: 'tool', tool_call_id: 'toolu_1', content: '18°C' },
      { role: 'user', content: 'thanks' },
      { role: 'tool', tool_call_id: 'toolu_2', content: 'Error: boom' },
    ]);
  });

  it('sends an assistant turn that only calls tools with null content', () => {
    const c = chat({ messages: [{ role: 'assistant', content: [{ type: 'tool_use', id: 't', name: 'f', input: {} }] }] });
    expect((c.messages as any[])[0].content).toBeNull();
  });

  it('maps tools to functions with input_schema as parameters', () => {
    const c = chat({ tools: [{ name: 'get_weather', description: 'Weather now', input_schema: { type: 'object', properties: { location: { type: 'string' } } } }] });
    expect(c.tools).toEqual([{ type: 'function', function: { name: 'get_weather', description: 'Weather now', parameters: { type: 'object', properties: { location: { type: 'string' } } } } }]);
  });

  it.each([
    [{ type: 'auto' }, 'auto'],
    [{ type: 'any' }, 'required'],
    [{ type: 'none' }, 'none'],
    [{ type: 'tool', name: 'get_weather' }, { type: 'function', function: { name: 'get_weather' } }],
  ])('maps tool_choice %j', (choice, expected) => {
    expect(chat({ tools: [{ name: 'get_weather' }], tool_choice: choice as never }).tool_choice).toEqual(expected);
  });

  it('ignores fields it does not know', () => {
    const c = chat({ ...({ thinking: { type: 'enabled' }, service_tier: 'auto', container: 'x' } as object) });
    expect(Object.keys(c).sort()).toEqual(['max_tokens', 'messages', 'model']);
  });
});

describe('validation', () => {
  it('names the field at fault', () => {
    expect(invalidReason({ ...base, model: '' })).toMatch(/^model/);
    expect(invalidReason({ ...base, messages: 'hi' })).toMatch(/^messages/);
    expect(invalidReason({ ...base, messages: [{ role: 'system', content: 'x' }] })).toMatch(/^messages\[0\]\.role/);
    expect(invalidReason({ ...base, max_tokens: undefined })).toMatch(/^max_tokens/);
    expect(invalidReason({ ...base, whatever: 1 })).toBeUndefined();
  });
});

describe('count_tokens estimate', () => {
  it('is total characters / 4 over system, message text, tool names and inputs, and tool results', () => {
    const req: MessagesRequest = {
      model: 'm', max_tokens: 1, system: 'abcd', // 4
      tools: [{ name: 'tool', input_schema: { a: 1 } }], // 4 + 7
      messages: [
        { role: 'user', content: 'hello world!' }, // 12
        { role: 'assistant', content: [{ type: 'text', text: 'ok' }, { type: 'tool_use', id: 'x', name: 'tool', input: { b: 2 } }] }, // 2 + 4 + 7
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'x', content: 'result' }] }, // 6
      ],
    };
    expect(estimateInputTokens(req)).toBe(Math.floor((4 + 11 + 12 + 13 + 6) / 4));
  });
});
