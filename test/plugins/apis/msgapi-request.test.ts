// Messages request → chat-completions request: each mapping of the spec.
import { describe, expect, it } from 'vitest';
import { withoutBillingHeader } from '../../../plugins/apis/msgapi/billing.js';
import { translationProblem } from '../../../plugins/apis/msgapi/check.js';
import { estimateInputTokens } from '../../../plugins/apis/msgapi/estimate.js';
import { toChatRequest } from '../../../plugins/apis/msgapi/request.js';
import type { MessagesRequest } from '../../../plugins/apis/msgapi/types.js';

const base: MessagesRequest = { model: 'm', max_tokens: 100, messages: [{ role: 'user', content: 'hi' }] };
const chat = (req: Partial<MessagesRequest>, o: Partial<Parameters<typeof toChatRequest>[1]> = {}) =>
  toChatRequest({ ...base, ...req } as MessagesRequest, { model: 'real', topK: false, streamUsage: false, ...o });

describe('request translation', () => {
  it('puts the system prompt (string or text blocks) first, as role system', () => {
    expect(chat({ system: 'be brief' }).messages).toEqual([
      { role: 'system', content: 'be brief' },
      { role: 'user', content: 'hi' },
    ]);
    expect(
      (
        chat({
          system: [
            { type: 'text', text: 'a' },
            { type: 'text', text: 'b' },
          ],
        }).messages as any[]
      )[0],
    ).toEqual({ role: 'system', content: 'a\nb' });
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
    const c = chat({
      messages: [
        {
          role: 'user',
          content: [
            { type: 'text', text: 'what is this?' },
            { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'iVBOR' } },
          ],
        },
      ],
    });
    expect((c.messages as any[])[0]).toEqual({
      role: 'user',
      content: [
        { type: 'text', text: 'what is this?' },
        { type: 'image_url', image_url: { url: 'data:image/png;base64,iVBOR' } },
      ],
    });
  });

  it('turns tool_use into assistant tool_calls and tool_result into tool messages', () => {
    const c = chat({
      messages: [
        { role: 'user', content: 'weather in Paris?' },
        {
          role: 'assistant',
          content: [
            { type: 'text', text: 'Checking.' },
            { type: 'tool_use', id: 'toolu_1', name: 'get_weather', input: { location: 'Paris' } },
          ],
        },
        {
          role: 'user',
          content: [
            { type: 'tool_result', tool_use_id: 'toolu_1', content: [{ type: 'text', text: '18°C' }] },
            { type: 'text', text: 'thanks' },
          ],
        },
        { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_2', name: 'get_weather', input: { location: 'Rome' } }] },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_2', content: 'boom', is_error: true }] },
      ],
    });
    expect(c.messages).toEqual([
      { role: 'user', content: 'weather in Paris?' },
      {
        role: 'assistant',
        content: 'Checking.',
        tool_calls: [{ id: 'toolu_1', type: 'function', function: { name: 'get_weather', arguments: '{"location":"Paris"}' } }],
      },
      { role: 'tool', tool_call_id: 'toolu_1', content: '18°C' },
      { role: 'user', content: 'thanks' },
      {
        role: 'assistant',
        content: null,
        tool_calls: [{ id: 'toolu_2', type: 'function', function: { name: 'get_weather', arguments: '{"location":"Rome"}' } }],
      },
      { role: 'tool', tool_call_id: 'toolu_2', content: 'Error: boom' },
    ]);
  });

  it('sends an assistant turn that only calls tools with null content', () => {
    const c = chat({ messages: [{ role: 'assistant', content: [{ type: 'tool_use', id: 't', name: 'f', input: {} }] }] });
    expect((c.messages as any[])[0].content).toBeNull();
  });

  it('maps tools to functions with input_schema as parameters', () => {
    const c = chat({
      tools: [{ name: 'get_weather', description: 'Weather now', input_schema: { type: 'object', properties: { location: { type: 'string' } } } }],
    });
    expect(c.tools).toEqual([
      {
        type: 'function',
        function: { name: 'get_weather', description: 'Weather now', parameters: { type: 'object', properties: { location: { type: 'string' } } } },
      },
    ]);
  });

  it.each([
    [{ type: 'auto' }, 'auto'],
    [{ type: 'any' }, 'required'],
    [{ type: 'none' }, 'none'],
    [
      { type: 'tool', name: 'get_weather' },
      { type: 'function', function: { name: 'get_weather' } },
    ],
  ])('maps tool_choice %j', (choice, expected) => {
    expect(chat({ tools: [{ name: 'get_weather' }], tool_choice: choice as never }).tool_choice).toEqual(expected);
  });

  it('drops fields and block types it cannot carry, naming them when asked', () => {
    const dropped: string[] = [];
    const c = chat(
      {
        ...({ thinking: { type: 'enabled' }, service_tier: 'auto', container: 'x' } as object),
        messages: [
          { role: 'user', content: [{ type: 'text', text: 'hi' }, { type: 'document', source: {} }, { type: 'search_result' }] },
          {
            role: 'assistant',
            content: [
              { type: 'thinking', thinking: 'hm' },
              { type: 'text', text: 'hello' },
            ],
          },
        ],
      },
      { dropped },
    );
    expect(Object.keys(c).sort()).toEqual(['max_tokens', 'messages', 'model']);
    expect(c.messages).toEqual([
      { role: 'user', content: 'hi' },
      { role: 'assistant', content: 'hello', reasoning_content: 'hm' },
    ]);
    expect(dropped.sort()).toEqual(['field container', 'field service_tier', 'user block document', 'user block search_result']);
  });

  it("earlier thinking goes back as reasoning_content; a thinking budget as the engine's reasoning_effort where it takes the level", () => {
    const c = chat({
      messages: [
        { role: 'user', content: 'hi' },
        {
          role: 'assistant',
          content: [
            { type: 'thinking', thinking: 'Let me ', signature: 'sig' },
            { type: 'thinking', thinking: 'look.' },
            { type: 'tool_use', id: 't1', name: 'ls', input: {} },
          ],
        },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't1', content: 'a.txt' }] },
      ],
    });
    expect((c.messages as unknown[])[1]).toEqual({
      role: 'assistant',
      content: null,
      reasoning_content: 'Let me look.',
      tool_calls: [{ id: 't1', type: 'function', function: { name: 'ls', arguments: '{}' } }],
    });
    const levels = ['low', 'medium', 'high'];
    for (const [budget, effort] of [
      [1024, 'low'],
      [8000, 'medium'],
      [32000, 'high'],
    ] as const) {
      expect(chat({ thinking: { type: 'enabled', budget_tokens: budget } } as object, { effortLevels: levels }).reasoning_effort).toBe(effort);
    }
    const dropped: string[] = [];
    expect(chat({ thinking: { type: 'disabled' } } as object, { effortLevels: levels, dropped }).reasoning_effort).toBeUndefined();
    expect(dropped).toEqual(['thinking as reasoning_effort none (the engine takes low, medium, high)']);
    expect(chat({ thinking: { type: 'disabled' } } as object, { effortLevels: ['none', 'low'] }).reasoning_effort).toBe('none');
    expect(chat({ thinking: { type: 'enabled', budget_tokens: 2048 } } as object).reasoning_effort).toBeUndefined();
  });
});

const reminder = (text: string) => `<system-reminder>\n${text}\n</system-reminder>`;

describe('mid-conversation system messages', () => {
  // The top-level system prompt stays first; a system message inside `messages` stays in place
  // as user-role text, merged with the user turns around it so roles still alternate.
  it('joins the user turn before it, never hoisted to the top', () => {
    const c = chat({
      system: 'You are helpful.',
      messages: [
        { role: 'user', content: 'Hello' },
        { role: 'system', content: 'The date is 2026-05-01.' },
        { role: 'assistant', content: 'Hi!' },
        { role: 'user', content: 'Bye' },
      ],
    });
    expect(c.messages).toEqual([
      { role: 'system', content: 'You are helpful.' },
      { role: 'user', content: `Hello\n${reminder('The date is 2026-05-01.')}` },
      { role: 'assistant', content: 'Hi!' },
      { role: 'user', content: 'Bye' },
    ]);
  });

  it('joins the user turn after it when an assistant turn comes before, after the tool results', () => {
    const c = chat({
      messages: [
        { role: 'user', content: 'Run it' },
        { role: 'assistant', content: [{ type: 'tool_use', id: 't1', name: 'run', input: {} }] },
        { role: 'system', content: [{ type: 'text', text: 'Be careful.' }] },
        {
          role: 'user',
          content: [
            { type: 'tool_result', tool_use_id: 't1', content: 'ok' },
            { type: 'text', text: 'Next?' },
          ],
        },
      ],
    });
    expect(c.messages).toEqual([
      { role: 'user', content: 'Run it' },
      { role: 'assistant', content: null, tool_calls: [{ id: 't1', type: 'function', function: { name: 'run', arguments: '{}' } }] },
      { role: 'tool', tool_call_id: 't1', content: 'ok' },
      { role: 'user', content: `${reminder('Be careful.')}\nNext?` },
    ]);
  });

  it('merges user turns on both sides into one (the messages API merges consecutive turns of a role)', () => {
    const c = chat({
      messages: [
        { role: 'user', content: 'A' },
        { role: 'system', content: 'S' },
        { role: 'user', content: 'B' },
      ],
    });
    expect(c.messages).toEqual([{ role: 'user', content: `A\n${reminder('S')}\nB` }]);
  });

  it('stands as a user turn of its own between two assistant turns, and at the end', () => {
    const c = chat({
      messages: [
        { role: 'user', content: 'A' },
        { role: 'assistant', content: 'x' },
        { role: 'system', content: 'S1' },
        { role: 'assistant', content: 'y' },
        { role: 'system', content: 'S2' },
      ],
    });
    const sent = c.messages as any[];
    expect(sent.map((m) => m.role)).toEqual(['user', 'assistant', 'user', 'assistant', 'user']);
    expect(sent[2].content).toBe(reminder('S1'));
    expect(sent[4].content).toBe(reminder('S2'));
  });

  it('drops an empty system message and names it', () => {
    const dropped: string[] = [];
    const c = chat(
      {
        messages: [
          { role: 'user', content: 'A' },
          { role: 'system', content: [] },
        ],
      },
      { dropped },
    );
    expect(c.messages).toEqual([{ role: 'user', content: 'A' }]);
    expect(dropped).toEqual(['an empty system message']);
  });

  it('never sends two user or two assistant messages in a row, nor a system message after the first', () => {
    const shapes = [
      ['system', 'user', 'system', 'system', 'assistant', 'system', 'assistant', 'user', 'user', 'system'],
      ['user', 'user', 'assistant', 'assistant', 'system', 'user'],
    ] as const;
    for (const roles of shapes) {
      const c = chat({ system: 'top', messages: roles.map((role, i) => ({ role, content: `m${i}` })) });
      const sent = (c.messages as any[]).map((m) => m.role);
      expect(sent[0]).toBe('system');
      expect(sent.slice(1)).not.toContain('system');
      for (let i = 1; i < sent.length; i++) expect(sent[i], sent.join(',')).not.toBe(sent[i - 1]);
    }
  });
});

describe('billing header block', () => {
  const billing = { type: 'text' as const, text: 'x-anthropic-billing-header: cc_version=2.1.154.e3f; cc_entrypoint=cli; cch=7c1e2;' };
  const system = [billing, { type: 'text' as const, text: 'You are Claude Code.' }];

  it('is left out of the system prompt toward local backends, kept otherwise', () => {
    expect((chat({ system }, { dropBillingHeader: true }).messages as any[])[0]).toEqual({ role: 'system', content: 'You are Claude Code.' });
    expect((chat({ system }).messages as any[])[0].content).toBe(`${billing.text}\nYou are Claude Code.`);
  });

  it('is removed from a passthrough body with every other field and its order kept; absent, nothing to do', () => {
    const body = { model: 'm', system, max_tokens: 5, messages: [] };
    const out = withoutBillingHeader(body)!;
    expect(Object.keys(out)).toEqual(['model', 'system', 'max_tokens', 'messages']);
    expect(out.system).toEqual([system[1]]);
    expect(body.system).toHaveLength(2); // the parsed request is not changed
    expect(Object.keys(withoutBillingHeader({ model: 'm', system: [billing] })!)).toEqual(['model']);
    expect(withoutBillingHeader({ model: 'm', system: [system[1]] })).toBeUndefined();
    expect(withoutBillingHeader({ model: 'm', system: billing.text })).toBeUndefined();
  });
});

describe('validation for translation', () => {
  it('names the field at fault', () => {
    expect(translationProblem({ ...base, messages: 'hi' })).toMatch(/^messages: /);
    expect(translationProblem({ ...base, messages: [{ role: 'developer', content: 'x' }] })).toMatch(/^messages\[0\]\.role/);
    expect(translationProblem({ ...base, messages: [{ role: 'user', content: [{ type: 'text', text: 1 }] }] })).toMatch(/^messages\[0\]\.content\[0\]\.text/);
    expect(translationProblem({ ...base, max_tokens: undefined })).toMatch(/^max_tokens/);
    expect(translationProblem({ ...base, max_tokens: undefined }, false)).toBeUndefined();
  });

  it('takes what it can carry or drop: system messages, unknown fields and block types', () => {
    expect(
      translationProblem({
        ...base,
        messages: [
          { role: 'user', content: 'a' },
          { role: 'system', content: 'b' },
        ],
      }),
    ).toBeUndefined();
    expect(translationProblem({ ...base, whatever: 1, messages: [{ role: 'user', content: [{ type: 'document', source: 1 }] }] })).toBeUndefined();
  });
});

describe('count_tokens estimate', () => {
  it('is total characters / 4 over system, message text, tool names and inputs, and tool results', () => {
    const req: MessagesRequest = {
      model: 'm',
      max_tokens: 1,
      system: 'abcd', // 4
      tools: [{ name: 'tool', input_schema: { a: 1 } }], // 4 + 7
      messages: [
        { role: 'user', content: 'hello world!' }, // 12
        {
          role: 'assistant',
          content: [
            { type: 'text', text: 'ok' },
            { type: 'tool_use', id: 'x', name: 'tool', input: { b: 2 } },
          ],
        }, // 2 + 4 + 7
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'x', content: 'result' }] }, // 6
      ],
    };
    expect(estimateInputTokens(req)).toBe(Math.floor((4 + 11 + 12 + 13 + 6) / 4));
  });

  it('reads what it can of any JSON and never throws', () => {
    for (const odd of [
      null,
      1,
      'x',
      [],
      { messages: 'x' },
      { messages: [null, 1, { content: [null, { type: 'text' }] }] },
      { system: [{ type: 'text', text: 5 }] },
      { tools: [null, { input_schema: 1 }] },
    ]) {
      expect(estimateInputTokens(odd)).toBeGreaterThanOrEqual(0);
    }
  });
});
