// Responses requests → chat-completions requests: what each field becomes, what strict chat
// templates need of the messages, what is dropped and what is refused; and the bounded store.
import { describe, expect, it } from 'vitest';
import { estimateInputTokens, inputItems, requestProblem, toChatRequest } from '../../../plugins/apis/responses/request.js';
import { ResponseStore } from '../../../plugins/apis/responses/store.js';
import type { InputItem, OutputItem, ResponsesRequest } from '../../../plugins/apis/responses/types.js';

const chat = (req: ResponsesRequest, o: { effortLevels?: string[]; streamUsage?: boolean; reasoningHistory?: boolean } = {}) => {
  const dropped: string[] = [];
  const body = toChatRequest(req, inputItems(req), {
    model: 'real-name',
    streamUsage: o.streamUsage ?? false,
    effortLevels: o.effortLevels ?? [],
    reasoningHistory: o.reasoningHistory ?? true,
    dropped,
  });
  return { body, dropped };
};

describe('Responses request translation', () => {
  it('a string input is one user message; instructions the system message; settings carried', () => {
    const { body, dropped } = chat(
      { model: 'alias', input: 'Hi', instructions: 'Be brief.', max_output_tokens: 64, temperature: 0.2, top_p: 0.9, stream: true },
      { streamUsage: true },
    );
    expect(body).toEqual({
      model: 'real-name',
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'Hi' },
      ],
      max_tokens: 64,
      temperature: 0.2,
      top_p: 0.9,
      stream: true,
      stream_options: { include_usage: true },
    });
    expect(dropped).toEqual([]);
  });

  it("Codex's shape: instructions and a developer message join one system message; two user messages in a row merge", () => {
    const { body } = chat({
      model: 'm',
      instructions: 'You are Codex.',
      input: [
        { type: 'message', role: 'developer', content: [{ type: 'input_text', text: '<permissions>sandboxed</permissions>' }] },
        { type: 'message', role: 'user', content: [{ type: 'input_text', text: '<environment_context>cwd</environment_context>' }] },
        { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'fix the bug' }] },
      ],
    });
    expect(body.messages).toEqual([
      { role: 'system', content: 'You are Codex.\n\n<permissions>sandboxed</permissions>' },
      { role: 'user', content: '<environment_context>cwd</environment_context>\n\nfix the bug' },
    ]);
  });

  it('a tool round trip: reasoning and the call on one assistant message, the output as a tool message; a later system message stays in place', () => {
    const input: InputItem[] = [
      { role: 'user', content: 'Weather in Paris?' },
      { type: 'reasoning', id: 'rs_1', summary: [], content: [{ type: 'reasoning_text', text: 'Need the tool.' }] },
      { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'Checking.' }] },
      { type: 'function_call', call_id: 'call_1', name: 'get_weather', arguments: '{"city":"Paris"}' },
      { type: 'function_call', call_id: 'call_2', name: 'get_time', arguments: '{}' },
      { type: 'function_call_output', call_id: 'call_1', output: '18°C' },
      { type: 'function_call_output', call_id: 'call_2', output: [{ type: 'input_text', text: '12:00' }] },
      { role: 'system', content: 'Answer in French.' },
    ];
    const { body } = chat({ model: 'm', input });
    expect(body.messages).toEqual([
      { role: 'user', content: 'Weather in Paris?' },
      {
        role: 'assistant',
        content: 'Checking.',
        reasoning_content: 'Need the tool.',
        tool_calls: [
          { id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } },
          { id: 'call_2', type: 'function', function: { name: 'get_time', arguments: '{}' } },
        ],
      },
      { role: 'tool', tool_call_id: 'call_1', content: '18°C' },
      { role: 'tool', tool_call_id: 'call_2', content: '12:00' },
      { role: 'user', content: '<system-reminder>\nAnswer in French.\n</system-reminder>' },
    ]);
  });

  it('reasoning never rides into a later turn; a hosted service is not sent it; two assistant texts are kept apart', () => {
    const input: InputItem[] = [
      { role: 'user', content: 'a' },
      { type: 'reasoning', summary: [{ type: 'summary_text', text: 'thinking about a' }] },
      { role: 'user', content: 'b' },
      { role: 'assistant', content: 'one' },
      { role: 'assistant', content: 'two' },
    ];
    const { body, dropped } = chat({ model: 'm', input });
    expect(body.messages).toEqual([
      { role: 'user', content: 'a\n\nb' },
      { role: 'assistant', content: 'one\n\ntwo' },
    ]);
    expect(dropped).toEqual(['reasoning with no assistant message after it']);
    const hosted = chat(
      {
        model: 'm',
        input: [
          { role: 'user', content: 'a' },
          { type: 'reasoning', content: [{ type: 'reasoning_text', text: 'hm' }] },
          { role: 'assistant', content: 'x' },
        ],
      },
      { reasoningHistory: false },
    );
    expect(hosted.body.messages).toEqual([
      { role: 'user', content: 'a' },
      { role: 'assistant', content: 'x' },
    ]);
    expect(hosted.dropped).toEqual(['reasoning sent back (the engine is a hosted service)']);
  });

  it('images become image_url parts; files, item references and hosted tools are dropped and named', () => {
    const { body, dropped } = chat({
      model: 'm',
      input: [
        {
          role: 'user',
          content: [
            { type: 'input_text', text: 'What is this?' },
            { type: 'input_image', image_url: 'data:image/png;base64,AAA', detail: 'low' },
            { type: 'input_file', text: undefined },
          ],
        },
        { type: 'item_reference', id: 'msg_old' },
      ],
      tools: [
        { type: 'web_search' },
        { type: 'function', name: 'lookup', description: 'Look up', parameters: { type: 'object', properties: { q: { type: 'string' } } }, strict: true },
      ],
      tool_choice: { type: 'function', name: 'lookup' },
      parallel_tool_calls: false,
      truncation: 'auto',
      seed: 7,
    } as unknown as ResponsesRequest);
    expect(body.messages).toEqual([
      {
        role: 'user',
        content: [
          { type: 'text', text: 'What is this?' },
          { type: 'image_url', image_url: { url: 'data:image/png;base64,AAA', detail: 'low' } },
        ],
      },
    ]);
    expect(body.tools).toEqual([
      {
        type: 'function',
        function: { name: 'lookup', description: 'Look up', parameters: { type: 'object', properties: { q: { type: 'string' } } }, strict: true },
      },
    ]);
    expect(body.tool_choice).toEqual({ type: 'function', function: { name: 'lookup' } });
    expect(body.parallel_tool_calls).toBe(false);
    expect(dropped).toEqual(['field seed', 'content part input_file', 'input item item_reference', 'tool web_search']);
  });

  it('text.format becomes response_format; reasoning.effort goes where the engine takes its level', () => {
    const schema = { type: 'object', properties: { answer: { type: 'string' } }, required: ['answer'] };
    expect(chat({ model: 'm', input: 'x', text: { format: { type: 'json_schema', name: 'answer', schema, strict: true } } }).body.response_format).toEqual({
      type: 'json_schema',
      json_schema: { name: 'answer', schema, strict: true },
    });
    expect(chat({ model: 'm', input: 'x', text: { format: { type: 'json_object' } } }).body.response_format).toEqual({ type: 'json_object' });
    expect(chat({ model: 'm', input: 'x', text: { format: { type: 'text' } } }).body.response_format).toBeUndefined();
    expect(chat({ model: 'm', input: 'x', reasoning: { effort: 'high' } }, { effortLevels: ['low', 'medium', 'high'] }).body.reasoning_effort).toBe('high');
    const minimal = chat({ model: 'm', input: 'x', reasoning: { effort: 'minimal' } }, { effortLevels: ['low', 'medium', 'high'] });
    expect(minimal.body.reasoning_effort).toBeUndefined();
    expect(minimal.dropped).toEqual(['reasoning.effort minimal (the engine takes low, medium, high)']);
  });

  it('names the field of a request it cannot read', () => {
    const cases: Array<[unknown, string]> = [
      [{}, 'input: a string or an array'],
      [{ input: 5 }, 'input: must be a string or an array'],
      [{ input: [{ role: 'robot', content: 'x' }] }, 'input[0].role'],
      [{ input: [{ role: 'user', content: [{ type: 'input_text' }] }] }, 'input[0].content[0].text'],
      [{ input: [{ role: 'user', content: [{ type: 'input_image', file_id: 'f' }] }] }, 'input[0].content[0].image_url'],
      [{ input: [{ type: 'function_call', call_id: 'c', name: 'f', arguments: {} }] }, 'input[0].arguments'],
      [{ input: [{ type: 'function_call_output', output: 'x' }] }, 'input[0].call_id'],
      [{ input: 'x', max_output_tokens: 0 }, 'max_output_tokens'],
      [{ input: 'x', tools: [{ type: 'function' }] }, 'tools[0].name'],
      [{ input: 'x', text: { format: { type: 'json_schema', name: 'n' } } }, 'text.format.schema'],
      [{ input: 'x', instructions: 3 }, 'instructions'],
      [{ input: [{ type: 'function_call_output', call_id: 'c', output: [null] }] }, 'input[0].output'],
      [{ input: [{ type: 'reasoning', content: [null] }] }, 'input[0].content'],
      [{ input: [{ type: 'reasoning', summary: 'x' }] }, 'input[0].summary'],
      [{ input: [{ type: 'reasoning', encrypted_content: 5 }] }, 'input[0].encrypted_content'],
      [{ input: [null] }, 'input[0]'],
      [{ input: 'x', tools: [null] }, 'tools[0]'],
    ];
    for (const [body, field] of cases) expect(requestProblem(body as Record<string, unknown>), JSON.stringify(body)).toContain(field);
    expect(requestProblem({ input: 'x' })).toBeUndefined();
    expect(requestProblem({ previous_response_id: 'resp_1' })).toBeUndefined(); // continues with no new input
  });

  it('estimates the prompt at four characters a token', () => {
    const req: ResponsesRequest = {
      model: 'm',
      instructions: '12345678',
      input: [
        { role: 'user', content: [{ type: 'input_text', text: '1234' }] },
        { type: 'function_call_output', call_id: 'c', output: '1234' },
      ],
    };
    expect(estimateInputTokens(req, inputItems(req))).toBe(4);
  });
});

describe('the response store', () => {
  const out = (text: string): OutputItem[] => [
    { type: 'message', id: `msg_${text}`, status: 'completed', role: 'assistant', content: [{ type: 'output_text', text, annotations: [], logprobs: [] }] },
  ];
  const user = (text: string): InputItem[] => [{ type: 'message', role: 'user', content: text }];
  const texts = (items: InputItem[] | undefined) =>
    items?.map((i) => (i as { content: unknown }).content).map((c) => (typeof c === 'string' ? c : (c as Array<{ text: string }>)[0].text));

  it('keeps each turn once and rebuilds the conversation from its last response', () => {
    const s = new ResponseStore({ max_responses: 10, max_bytes: 1 << 20, ttl: 60_000 });
    s.put('r1', undefined, user('hi'), out('hello'));
    s.put('r2', 'r1', user('again'), out('yes'));
    s.put('r3', 'r2', user('more'), out('ok'));
    expect(texts(s.get('r3'))).toEqual(['hi', 'hello', 'again', 'yes', 'more', 'ok']);
    expect(texts(s.get('r1'))).toEqual(['hi', 'hello']);
    // Each turn counted once: a long conversation's size grows with its length, not its square.
    const big = new ResponseStore({ max_responses: 1000, max_bytes: 1 << 30, ttl: 60_000 });
    for (let i = 0; i < 200; i++) big.put(`r${i}`, i ? `r${i - 1}` : undefined, user('x'.repeat(100)), out('y'));
    expect((big as unknown as { bytes: number }).bytes).toBeLessThan(200 * 300);
    expect(big.get('r199')!.length).toBe(400);
  });

  it('is bounded by count, size and age; continuing a conversation keeps its whole chain; off at max_responses 0', () => {
    const s = new ResponseStore({ max_responses: 3, max_bytes: 1 << 20, ttl: 1000 });
    s.put('a1', undefined, user('1'), out('1'), 0);
    s.put('b1', undefined, user('2'), out('2'), 10);
    s.put('a2', 'a1', user('3'), out('3'), 20);
    s.put('c1', undefined, user('4'), out('4'), 30); // four: the least recently continued (b1) goes
    expect([!!s.get('a2', 30), s.get('b1', 30), !!s.get('c1', 30)]).toEqual([true, undefined, true]);
    expect(s.get('a2', 1031)).toBeUndefined(); // older than the ttl
    const size = JSON.stringify([...user('x'), ...out('x')]).length;
    const small = new ResponseStore({ max_responses: 100, max_bytes: size * 2, ttl: 60_000 });
    for (const id of ['p', 'q', 'r']) small.put(id, undefined, user('x'), out('x'));
    expect([small.get('p'), !!small.get('q'), !!small.get('r')]).toEqual([undefined, true, true]);
    small.put('huge', undefined, user('x'.repeat(size * 3)), out('x'));
    expect(small.get('huge')).toBeUndefined();
    const off = new ResponseStore({ max_responses: 0, max_bytes: 1, ttl: 1 });
    off.put('z', undefined, user('1'), out('1'));
    expect([off.enabled, off.size]).toEqual([false, 0]);
    s.configure({ max_responses: 1, max_bytes: 1 << 20, ttl: 60_000 }, 40);
    expect(s.size).toBe(1);
  });
});
