// The OpenAI Responses API (POST /v1/responses) as the official clients read it: a response
// object with `output` items (an assistant message with output_text, then function_call items
// when the request offers tools), or, with stream: true, SSE events named by type —
// response.created, response.in_progress, per item output_item.added / content_part.added /
// output_text.delta… / output_text.done / content_part.done / output_item.done (function calls:
// function_call_arguments.delta / .done), then response.completed. No [DONE] line: the stream
// ends after response.completed.
import type { ServerResponse } from 'node:http';
import type { FakeBackend, Recorded } from './backend.js';
import { pieces, sendJson } from './openai.js';

const CREATED = 1_732_000_000;

function usage(rec: Recorded, text: string) {
  const input = Math.max(1, Math.ceil(rec.text.length / 4));
  const output = Math.max(1, Math.ceil(text.length / 4));
  return {
    input_tokens: input,
    input_tokens_details: { cached_tokens: 0 },
    output_tokens: output,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: input + output,
  };
}

export async function responses(fake: FakeBackend, rec: Recorded, res: ServerResponse): Promise<void> {
  const req = rec.json ?? {};
  const model = typeof req.model === 'string' ? req.model : (fake.models[0]?.name ?? 'fake');
  const n = fake.executions;
  const id = `resp_${fake.name}_${n}`;
  const msgId = `msg_${fake.name}_${n}`;
  const text = fake.reply;
  const calls = Array.isArray(req.tools) && req.tools.length ? fake.toolCalls : [];
  const message = {
    id: msgId,
    type: 'message',
    status: 'completed',
    role: 'assistant',
    content: [{ type: 'output_text', text, annotations: [], logprobs: [] }],
  };
  const callItems = calls.map((c, i) => ({
    id: `fc_${fake.name}_${n}_${i}`,
    type: 'function_call',
    status: 'completed',
    call_id: `call_${fake.name}_${i}`,
    name: c.name,
    arguments: c.arguments,
  }));
  const response = (status: string, output: unknown[], done: boolean) => ({
    id,
    object: 'response',
    created_at: CREATED,
    status,
    error: null,
    incomplete_details: null,
    instructions: req.instructions ?? null,
    max_output_tokens: req.max_output_tokens ?? null,
    model,
    output,
    parallel_tool_calls: true,
    previous_response_id: req.previous_response_id ?? null,
    reasoning: { effort: null, summary: null },
    store: req.store ?? true,
    temperature: req.temperature ?? 1,
    text: { format: { type: 'text' } },
    tool_choice: req.tool_choice ?? 'auto',
    tools: req.tools ?? [],
    top_p: req.top_p ?? 1,
    truncation: 'disabled',
    usage: done ? usage(rec, text) : null,
    metadata: req.metadata ?? {},
  });
  const output = [message, ...callItems];
  if (!req.stream) {
    sendJson(res, 200, response('completed', output, true), fake);
    return;
  }
  let seq = 0;
  const ev = (type: string, data: object) => `event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: seq++, ...data })}\n\n`;
  const events = [
    ev('response.created', { response: response('in_progress', [], false) }),
    ev('response.in_progress', { response: response('in_progress', [], false) }),
    ev('response.output_item.added', { output_index: 0, item: { ...message, status: 'in_progress', content: [] } }),
    ev('response.content_part.added', {
      item_id: msgId,
      output_index: 0,
      content_index: 0,
      part: { type: 'output_text', text: '', annotations: [], logprobs: [] },
    }),
    ...pieces(text).map((delta) => ev('response.output_text.delta', { item_id: msgId, output_index: 0, content_index: 0, delta, logprobs: [] })),
    ev('response.output_text.done', { item_id: msgId, output_index: 0, content_index: 0, text, logprobs: [] }),
    ev('response.content_part.done', { item_id: msgId, output_index: 0, content_index: 0, part: message.content[0] }),
    ev('response.output_item.done', { output_index: 0, item: message }),
  ];
  callItems.forEach((item, k) => {
    const output_index = k + 1;
    events.push(ev('response.output_item.added', { output_index, item: { ...item, status: 'in_progress', arguments: '' } }));
    // Arguments arrive in small pieces, as real servers send them.
    for (let i = 0; i < item.arguments.length; i += 7)
      events.push(ev('response.function_call_arguments.delta', { item_id: item.id, output_index, delta: item.arguments.slice(i, i + 7) }));
    events.push(ev('response.function_call_arguments.done', { item_id: item.id, output_index, arguments: item.arguments }));
    events.push(ev('response.output_item.done', { output_index, item }));
  });
  events.push(ev('response.completed', { response: response('completed', output, true) }));
  await fake.writeStream(res, events, 'text/event-stream');
}
