// Chat-completions streams → Responses API events: the order the API defines, numbered from 0,
// the same at every split of the backend's bytes, against a recorded llama-server reasoning
// stream and reconstructed reasoning-then-answer and reasoning-then-tool-call streams.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ResponsesStreamTranslator, eventsForResponse } from '../../../plugins/apis/responses/stream.js';
import { shellOf, toResponse } from '../../../plugins/apis/responses/response.js';
import type { OutputItem, ResponsesRequest } from '../../../plugins/apis/responses/types.js';
import { inputItems, toChatRequest } from '../../../plugins/apis/responses/request.js';

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

const fixture = (name: string) => readFileSync(`test/fixtures/reasoning/${name}`, 'utf8');
const chunk = (delta: object, finish: string | null = null, extra: object = {}) =>
  `data: ${JSON.stringify({ object: 'chat.completion.chunk', choices: [{ index: 0, delta, finish_reason: finish }], ...extra })}\n\n`;
const shell = (req: Partial<ResponsesRequest> = {}) => shellOf({ model: 'qwen3-8b', input: 'What is 2+2?', ...req }, () => 3, false);

/** Run a chat SSE body through a translator, fed in the given pieces. */
function translate(pieces: Buffer[], saved?: (o: OutputItem[]) => void, req: Partial<ResponsesRequest> = {}) {
  const t = new ResponsesStreamTranslator(shell(req), saved);
  let out = t.start();
  for (const p of pieces) out += t.feed(p);
  out += t.end();
  return { events: parse(out), text: out, translator: t };
}
const whole = (body: string, req: Partial<ResponsesRequest> = {}) => translate([Buffer.from(body)], undefined, req);
/** Ids are random: the same stream gives the same events once they are named by place. */
const stable = (text: string) => text.replace(/"(resp|msg|rs|fc|call)_[0-9A-Za-z]{22}"/g, '"$1_ID"').replace(/"created_at":\d+/g, '"created_at":0');

/** What the API requires of any event sequence. */
function checkOrder(events: Event[]) {
  events.forEach((e, i) => {
    expect(e.event).toBe(e.data.type);
    expect(e.data.sequence_number).toBe(i);
  });
  expect(events[0].event).toBe('response.created');
  expect(events[1].event).toBe('response.in_progress');
  expect(['response.completed', 'response.incomplete', 'response.failed']).toContain(events.at(-1)!.event);
  // Every item is added before its deltas and done after them; indexes count the output.
  const open = new Map<number, string>();
  for (const e of events) {
    const d = e.data;
    if (e.event === 'response.output_item.added') {
      expect(d.output_index).toBe(open.size);
      open.set(d.output_index, d.item.id);
    } else if (d.item_id !== undefined) expect(open.get(d.output_index)).toBe(d.item_id);
  }
  const final = events.at(-1)!.data.response;
  expect(final.output.length).toBe(open.size);
  final.output.forEach((item: { id: string }, i: number) => expect(item.id).toBe(open.get(i)));
  // Each item as its output_item.done gave it is the one in the final response.
  if (final.status !== 'failed')
    for (const e of events) if (e.event === 'response.output_item.done') expect(final.output[e.data.output_index]).toEqual(e.data.item);
}

describe('Responses stream translation', () => {
  it("a plain answer: the API's event order, deltas and the whole text in the completed response", () => {
    const body = `${chunk({ role: 'assistant', content: '' }) + chunk({ content: 'Hello' }) + chunk({ content: ' there' }) + chunk({}, 'stop')}data: [DONE]\n\n`;
    const { events } = whole(body);
    checkOrder(events);
    expect(events.map((e) => e.event)).toEqual([
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.content_part.added',
      'response.output_text.delta',
      'response.output_text.delta',
      'response.output_text.done',
      'response.content_part.done',
      'response.output_item.done',
      'response.completed',
    ]);
    expect(events[0].data.response).toMatchObject({ object: 'response', status: 'in_progress', model: 'qwen3-8b', output: [] });
    expect(events[4].data).toMatchObject({ item_id: events[2].data.item.id, output_index: 0, content_index: 0, delta: 'Hello', logprobs: [] });
    const done = events.at(-1)!.data.response;
    expect(done).toMatchObject({ status: 'completed', incomplete_details: null, error: null });
    expect(done.output).toEqual([
      {
        type: 'message',
        id: events[2].data.item.id,
        status: 'completed',
        role: 'assistant',
        content: [{ type: 'output_text', text: 'Hello there', annotations: [], logprobs: [] }],
      },
    ]);
    // The request's settings echoed: the defaults here, what it set below.
    expect(done).toMatchObject({
      instructions: null,
      max_output_tokens: null,
      parallel_tool_calls: true,
      previous_response_id: null,
      reasoning: { effort: null, summary: null },
      store: false,
      temperature: null,
      text: { format: { type: 'text' } },
      tool_choice: 'auto',
      tools: [],
      top_p: null,
      truncation: 'disabled',
      metadata: {},
    });
    const set = {
      instructions: 'Be "brief".',
      max_output_tokens: 9,
      parallel_tool_calls: false,
      previous_response_id: 'resp_x',
      reasoning: { effort: 'low', summary: 'auto' },
      temperature: 0.5,
      text: { format: { type: 'json_object' } },
      tool_choice: 'required',
      tools: [{ type: 'function', name: 'f' }],
      top_p: 0.9,
      metadata: { k: 'v' },
    } as const;
    expect(whole(body, set as never).events.at(-1)!.data.response).toMatchObject(set);
    // No usage from the backend: estimated, characters / 4.
    expect(done.usage).toEqual({
      input_tokens: 3,
      input_tokens_details: { cached_tokens: 0 },
      output_tokens: 2,
      output_tokens_details: { reasoning_tokens: 0 },
      total_tokens: 5,
    });
  });

  it("is the same at every split of the backend's bytes (multi-byte characters, CRLF lines included)", () => {
    const body = fixture('reasoning-then-tool-call.sse').replace('I should', "L'utilisateur 🤔 — 用户").replace(/\n/g, '\r\n');
    const bytes = Buffer.from(body);
    const expected = stable(whole(body).text);
    expect(expected).toContain('🤔 — 用户');
    for (let i = 1; i < bytes.length; i++) {
      expect(stable(translate([bytes.subarray(0, i), bytes.subarray(i)]).text), `split at byte ${i}`).toBe(expected);
    }
    for (const size of [1, 2, 3, 7]) {
      const pieces: Buffer[] = [];
      for (let i = 0; i < bytes.length; i += size) pieces.push(bytes.subarray(i, i + size));
      expect(stable(translate(pieces).text), `pieces of ${size}`).toBe(expected);
    }
  });

  it("the recorded llama-server reasoning stream: a reasoning item, incomplete on length, the server's usage", () => {
    const { events } = whole(fixture('llama-server-reasoning.sse'));
    checkOrder(events);
    const recorded = fixture('llama-server-reasoning.sse')
      .split('\n\n')
      .filter((l) => l.startsWith('data: {'))
      .map((l) => JSON.parse(l.slice(6)));
    const thought = recorded.map((c) => c.choices[0]?.delta?.reasoning_content ?? '').join('');
    expect(thought.length).toBeGreaterThan(0);
    expect(events[2].data.item).toEqual({ type: 'reasoning', id: expect.stringMatching(/^rs_/), summary: [], content: [] });
    expect(events[3].data.part).toEqual({ type: 'reasoning_text', text: '' });
    const deltas = events.filter((e) => e.event === 'response.reasoning_text.delta');
    expect(deltas.map((e) => e.data.delta).join('')).toBe(thought);
    expect(events.find((e) => e.event === 'response.reasoning_text.done')!.data.text).toBe(thought);
    const last = events.at(-1)!;
    expect(last.event).toBe('response.incomplete');
    expect(last.data.response.incomplete_details).toEqual({ reason: 'max_output_tokens' });
    expect(last.data.response.output).toEqual([
      { type: 'reasoning', id: events[2].data.item.id, summary: [], content: [{ type: 'reasoning_text', text: thought }] },
    ]);
    const usage = recorded.find((c) => c.usage).usage;
    expect(last.data.response.usage).toMatchObject({
      input_tokens: usage.prompt_tokens,
      output_tokens: usage.completion_tokens,
      total_tokens: usage.prompt_tokens + usage.completion_tokens,
    });
  });

  it('reasoning, then the answer: the reasoning item closes before the message opens', () => {
    const { events } = whole(fixture('reasoning-then-answer.sse'));
    checkOrder(events);
    const added = events.filter((e) => e.event === 'response.output_item.added').map((e) => e.data.item.type);
    expect(added).toEqual(['reasoning', 'message']);
    const reasoningDone = events.findIndex((e) => e.event === 'response.output_item.done' && e.data.item.type === 'reasoning');
    const messageAdded = events.findIndex((e) => e.event === 'response.output_item.added' && e.data.item.type === 'message');
    expect(reasoningDone).toBeLessThan(messageAdded);
    const final = events.at(-1)!.data.response;
    expect(final.status).toBe('completed');
    expect(final.output[0].content[0].text).toBe('The user asks for 2+2. That is 4.');
    expect(final.output[1].content[0].text).toBe('2 + 2 = 4.');
    expect(final.usage).toMatchObject({ input_tokens: 21, output_tokens: 14 });
  });

  it('a function call: announced with its name, arguments as they come, then done whole', () => {
    const { events } = whole(fixture('reasoning-then-tool-call.sse'));
    checkOrder(events);
    const added = events.find((e) => e.event === 'response.output_item.added' && e.data.item.type === 'function_call')!;
    expect(added.data.item).toEqual({
      type: 'function_call',
      id: expect.stringMatching(/^fc_/),
      call_id: 'call_Xk2',
      name: 'get_weather',
      arguments: '',
      status: 'in_progress',
    });
    const deltas = events.filter((e) => e.event === 'response.function_call_arguments.delta');
    expect(deltas.map((e) => e.data.delta)).toEqual(['{"loc', 'ation": ', '"Paris"}']);
    expect(events.find((e) => e.event === 'response.function_call_arguments.done')!.data).toMatchObject({
      item_id: added.data.item.id,
      output_index: 1,
      name: 'get_weather',
      arguments: '{"location": "Paris"}',
    });
    const final = events.at(-1)!.data.response;
    expect(final.status).toBe('completed');
    expect(final.output[1]).toEqual({
      type: 'function_call',
      id: added.data.item.id,
      call_id: 'call_Xk2',
      name: 'get_weather',
      arguments: '{"location": "Paris"}',
      status: 'completed',
    });
  });

  it('parallel calls interleaved by index, a name that comes late, text after them', () => {
    const body =
      chunk({ tool_calls: [{ index: 0, id: 'c0', function: { arguments: '{"a"' } }] }) +
      chunk({ tool_calls: [{ index: 0, function: { name: 'first' } }] }) +
      chunk({ tool_calls: [{ index: 1, id: 'c1', function: { name: 'second', arguments: '{}' } }] }) +
      chunk({ tool_calls: [{ index: 0, function: { arguments: ':1}' } }] }) +
      chunk({}, 'tool_calls') +
      'data: [DONE]\n\n';
    const { events } = whole(body);
    checkOrder(events);
    const final = events.at(-1)!.data.response;
    expect(final.output.map((o: any) => [o.call_id, o.name, o.arguments])).toEqual([
      ['c0', 'first', '{"a":1}'],
      ['c1', 'second', '{}'],
    ]);
    const args0 = events
      .filter((e) => e.event === 'response.function_call_arguments.delta' && e.data.output_index === 0)
      .map((e) => e.data.delta)
      .join('');
    expect(args0).toBe('{"a":1}');
  });

  it('a backend error mid-stream: response.failed with what was said, nothing after it', () => {
    const body = `${chunk({ content: 'Hel' })}data: {"error":{"message":"slot died"}}\n\n${chunk({ content: 'lo' })}`;
    const { events } = whole(body);
    expect(events.at(-1)!.event).toBe('response.failed');
    expect(events.at(-1)!.data.response).toMatchObject({ status: 'failed', error: { code: 'server_error', message: 'slot died' } });
    // What was said is in the failed response's output, not an empty placeholder.
    expect(events.at(-1)!.data.response.output).toEqual([
      {
        type: 'message',
        id: expect.any(String),
        status: 'incomplete',
        role: 'assistant',
        content: [{ type: 'output_text', text: 'Hel', annotations: [], logprobs: [] }],
      },
    ]);
    events.forEach((e, i) => expect(e.data.sequence_number).toBe(i));
    const t = new ResponsesStreamTranslator(shell());
    t.start();
    t.feed(Buffer.from(chunk({ content: 'x' })));
    const failed = parse(t.fail('connection reset'));
    expect(failed.map((e) => e.event)).toEqual(['response.failed']);
    expect(t.end()).toBe('');
  });

  it('content_filter is incomplete too; a stream without [DONE] is closed at its end; skips what is not JSON', () => {
    const filtered = whole(chunk({ content: 'x' }) + chunk({}, 'content_filter'));
    expect(filtered.events.at(-1)!.data.response.incomplete_details).toEqual({ reason: 'content_filter' });
    const junk = whole(`${chunk({ content: 'a' })}data: {not json\n\n: keep-alive\n\n${chunk({}, 'stop')}`);
    expect(junk.translator.malformed).toBe(1);
    expect(junk.events.at(-1)!.event).toBe('response.completed');
  });

  it('hands the finished output to the store; a failed stream hands nothing', () => {
    let saved: OutputItem[] | undefined;
    whole(fixture('reasoning-then-answer.sse'));
    translate([Buffer.from(fixture('reasoning-then-answer.sse'))], (o) => (saved = o));
    expect(saved!.map((o) => o.type)).toEqual(['reasoning', 'message']);
    saved = undefined;
    const t = new ResponsesStreamTranslator(shell(), (o) => (saved = o));
    t.start();
    t.fail('gone');
    expect(saved).toBeUndefined();
  });
});

describe('reasoning as the client asks for it', () => {
  it('reasoning.summary set: summary parts and reasoning_summary events (what the AI SDK and Codex show)', () => {
    const { events } = whole(fixture('reasoning-then-answer.sse'), { reasoning: { summary: 'auto' } });
    checkOrder(events);
    expect(events[2].data.item).toEqual({ type: 'reasoning', id: expect.stringMatching(/^rs_/), summary: [] });
    expect(events[3]).toMatchObject({ event: 'response.reasoning_summary_part.added', data: { summary_index: 0, part: { type: 'summary_text', text: '' } } });
    const deltas = events.filter((e) => e.event === 'response.reasoning_summary_text.delta');
    expect(deltas.map((e) => e.data.delta).join('')).toBe('The user asks for 2+2. That is 4.');
    expect(deltas[0].data).toMatchObject({ item_id: events[2].data.item.id, output_index: 0, summary_index: 0 });
    expect(events.map((e) => e.event)).toContain('response.reasoning_summary_part.done');
    expect(events.at(-1)!.data.response.output[0]).toEqual({
      type: 'reasoning',
      id: events[2].data.item.id,
      summary: [{ type: 'summary_text', text: 'The user asks for 2+2. That is 4.' }],
    });
  });

  it('include reasoning.encrypted_content: the text handed out as a token that comes back as reasoning_content (Codex leaves the text out)', () => {
    const { events } = whole(fixture('reasoning-then-tool-call.sse'), { include: ['reasoning.encrypted_content'], reasoning: { summary: 'auto' } });
    const item = events.at(-1)!.data.response.output[0];
    expect(item.encrypted_content).toEqual(expect.any(String));
    const call = events.at(-1)!.data.response.output[1];
    // Codex sends the item back without its summary text, the token kept.
    const next: ResponsesRequest = {
      model: 'm',
      input: [
        { role: 'user', content: 'Weather?' },
        { type: 'reasoning', id: item.id, summary: [], encrypted_content: item.encrypted_content },
        call,
        { type: 'function_call_output', call_id: call.call_id, output: '18' },
      ],
    };
    const chat = toChatRequest(next, inputItems(next), { model: 'm', streamUsage: false, effortLevels: [], reasoningHistory: true });
    expect((chat.messages as Array<Record<string, unknown>>)[1]).toMatchObject({ role: 'assistant', reasoning_content: 'I should check the weather.' });
  });
});

describe('backends that break the rules', () => {
  it('every call at index 0 with its own id: separate calls; a call delta that is null is skipped', () => {
    const body =
      chunk({ tool_calls: [{ index: 0, id: 'a', function: { name: 'f', arguments: '{}' } }] }) +
      chunk({ tool_calls: [null, { index: 0, id: 'b', function: { name: 'g', arguments: '{"x":1}' } }] }) +
      chunk({ tool_calls: [{ id: 'c', function: { name: 'h', arguments: '{}' } }] }) +
      chunk({}, 'tool_calls') +
      'data: [DONE]\n\n';
    const { events } = whole(body);
    checkOrder(events);
    expect(events.at(-1)!.data.response.output.map((o: any) => [o.call_id, o.name, o.arguments])).toEqual([
      ['a', 'f', '{}'],
      ['b', 'g', '{"x":1}'],
      ['c', 'h', '{}'],
    ]);
  });

  it('usage that is not a count is left out; the estimate stands', () => {
    const { events } = whole(
      `${chunk({ content: 'abcdefgh' }) + chunk({}, 'stop', { usage: { prompt_tokens: '12', completion_tokens: null } })}data: [DONE]\n\n`,
    );
    expect(events.at(-1)!.data.response.usage).toMatchObject({ input_tokens: 3, output_tokens: 2, total_tokens: 5 });
  });
});

describe('whole replies', () => {
  it('a chat reply with reasoning and tool calls as a response object, and as events for a stream the backend ignored', () => {
    const reply = JSON.parse(fixture('llama-server-reasoning.json'));
    const r = JSON.parse(toResponse(reply, shell(), { input: 60, output: 16, cached: 59, reasoning: 16 }).json);
    expect(r).toMatchObject({
      object: 'response',
      status: 'incomplete',
      incomplete_details: { reason: 'max_output_tokens' },
      usage: {
        input_tokens: 60,
        input_tokens_details: { cached_tokens: 59 },
        output_tokens: 16,
        output_tokens_details: { reasoning_tokens: 16 },
        total_tokens: 76,
      },
    });
    expect((r.output as OutputItem[]).map((o) => o.type)).toEqual(['reasoning']); // content "" adds no message
    const withTools = JSON.parse(
      toResponse(
        {
          choices: [
            {
              finish_reason: 'tool_calls',
              message: { content: 'Checking.', tool_calls: [{ id: 'call_1', function: { name: 'f', arguments: { x: 1 } as never } }] },
            },
          ],
        },
        shell(),
        null,
      ).json,
    );
    expect(withTools.output).toEqual([
      {
        type: 'message',
        id: expect.any(String),
        status: 'completed',
        role: 'assistant',
        content: [{ type: 'output_text', text: 'Checking.', annotations: [], logprobs: [] }],
      },
      { type: 'function_call', id: expect.stringMatching(/^fc_/), call_id: 'call_1', name: 'f', arguments: '{"x":1}', status: 'completed' },
    ]);
    const events = parse(eventsForResponse(withTools));
    checkOrder(events);
    expect(events.at(-1)!.data.response).toEqual(withTools);
    expect(events.filter((e) => e.event === 'response.output_text.delta').map((e) => e.data.delta)).toEqual(['Checking.']);
  });
});
