// Chat-completions SSE → Responses API events, as the chunks arrive, numbered from 0 in
// `sequence_number`: response.created, response.in_progress; per output item
// response.output_item.added, then for text (reasoning_text for reasoning, output_text for the
// answer) response.content_part.added, its deltas, its .done and response.content_part.done, or
// for a function call its response.function_call_arguments.delta and .done; then
// response.output_item.done. An item closes when the stream moves to another kind. Last comes
// response.completed (or response.incomplete on `length`/`content_filter`) with the whole
// output and usage, or response.failed if the backend fails mid-stream. Every frame's `event:`
// equals its data's `type`.
import { ChatStreamReader, reasoningOf, type ChatChoiceDelta, type ToolCallDelta } from '../chat-stream.js';
import { newId } from '../new-id.js';
import { messageItem, reasoningItem, responseObject, statusOf, usageOf, type Shell } from './response.js';
import type { OutputItem } from './types.js';

interface OpenText { kind: 'reasoning' | 'message'; id: string; index: number; parts: string[] }
interface OpenCall { id: string; callId: string; name: string; args: string; index: number; announced: boolean }

const TEXT_EVENTS = {
  reasoning: { delta: 'response.reasoning_text.delta', done: 'response.reasoning_text.done', part: 'reasoning_text' },
  message: { delta: 'response.output_text.delta', done: 'response.output_text.done', part: 'output_text' },
} as const;

export class ResponsesStreamTranslator extends ChatStreamReader {
  private seq = 0;
  private readonly output: OutputItem[] = [];
  private open: OpenText | null = null;
  private readonly calls = new Map<number, OpenCall>();
  private finishReason: string | null = null;
  private outputChars = 0;

  constructor(private readonly shell: Shell, private readonly onOutput?: (output: OutputItem[]) => void) {
    super();
  }

  /** The output items so far (all of them once the stream has ended). */
  get items(): readonly OutputItem[] {
    return this.output;
  }

  start(): string {
    const response = responseObject(this.shell, 'in_progress', [], null);
    return this.frame('response.created', { response }) + this.frame('response.in_progress', { response });
  }

  protected choice(choice: ChatChoiceDelta): string {
    let out = '';
    const delta = choice.delta ?? {};
    const reasoning = reasoningOf(delta);
    if (reasoning) out += this.text('reasoning', reasoning);
    if (typeof delta.content === 'string' && delta.content) out += this.text('message', delta.content);
    for (const call of delta.tool_calls ?? []) out += this.callDelta(call);
    if (choice.finish_reason) this.finishReason = choice.finish_reason;
    return out;
  }

  protected closing(): string {
    const { status, incomplete_details } = statusOf(this.finishReason);
    const out = this.closeText(status) + this.closeCalls(status);
    this.onOutput?.(this.output);
    const response = responseObject(this.shell, status, this.output, usageOf(this.usage, this.shell, this.outputChars), { incomplete_details });
    return out + this.frame(status === 'completed' ? 'response.completed' : 'response.incomplete', { response });
  }

  protected failure(message: string): string {
    const response = responseObject(this.shell, 'failed', this.output, usageOf(this.usage, this.shell, this.outputChars), { error: { code: 'server_error', message } });
    return this.frame('response.failed', { response });
  }

  private frame(type: string, data: Record<string, unknown>): string {
    return `event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: this.seq++, ...data })}\n\n`;
  }

  /** The most frequent frame, built without an intermediate object. */
  private deltaFrame(o: OpenText, text: string): string {
    const type = TEXT_EVENTS[o.kind].delta;
    const logprobs = o.kind === 'message' ? ',"logprobs":[]' : '';
    return `event: ${type}\ndata: {"type":"${type}","sequence_number":${this.seq++},"item_id":"${o.id}","output_index":${o.index},"content_index":0,"delta":${JSON.stringify(text)}${logprobs}}\n\n`;
  }

  private text(kind: OpenText['kind'], text: string): string {
    let out = '';
    if (this.open?.kind !== kind) {
      out += this.closeCalls('completed') + this.closeText('completed');
      const id = newId(kind === 'message' ? 'msg_' : 'rs_');
      const o: OpenText = (this.open = { kind, id, index: this.output.length, parts: [] });
      const item = kind === 'message' ? { type: 'message', id, status: 'in_progress', role: 'assistant', content: [] } : { type: 'reasoning', id, summary: [], content: [] };
      this.output.push(item as OutputItem); // replaced by the finished item when it closes
      out += this.frame('response.output_item.added', { output_index: o.index, item });
      out += this.frame('response.content_part.added', { item_id: id, output_index: o.index, content_index: 0, part: emptyPart(kind) });
    }
    this.open!.parts.push(text);
    this.outputChars += text.length;
    return out + this.deltaFrame(this.open!, text);
  }

  private closeText(status: 'completed' | 'incomplete'): string {
    const o = this.open;
    if (!o) return '';
    this.open = null;
    const text = o.parts.join('');
    const item = o.kind === 'message' ? messageItem(text, status, o.id) : reasoningItem(text, o.id);
    this.output[o.index] = item;
    const part = item.type === 'message' ? item.content[0] : (item as { content: unknown[] }).content[0];
    const ids = { item_id: o.id, output_index: o.index, content_index: 0 };
    return (
      this.frame(TEXT_EVENTS[o.kind].done, o.kind === 'message' ? { ...ids, text, logprobs: [] } : { ...ids, text }) +
      this.frame('response.content_part.done', { ...ids, part }) +
      this.frame('response.output_item.done', { output_index: o.index, item })
    );
  }

  private callDelta(delta: ToolCallDelta): string {
    const i = delta.index ?? 0;
    let call = this.calls.get(i);
    let out = '';
    if (!call) {
      out += this.closeText('completed');
      call = { id: newId('fc_'), callId: delta.id || newId('call_'), name: '', args: '', index: -1, announced: false };
      this.calls.set(i, call);
    }
    if (delta.function?.name) call.name += delta.function.name;
    const args = delta.function?.arguments ?? '';
    // Announced once its name is known; arguments that came before go out with the first delta.
    if (!call.announced && call.name) {
      out += this.announce(call);
      if (call.args) out += this.argsFrame(call, call.args);
    }
    if (args) {
      call.args += args;
      this.outputChars += args.length;
      if (call.announced) out += this.argsFrame(call, args);
    }
    return out;
  }

  private announce(call: OpenCall): string {
    call.announced = true;
    call.index = this.output.length;
    const item: OutputItem = { type: 'function_call', id: call.id, call_id: call.callId, name: call.name, arguments: '', status: 'incomplete' };
    this.output.push(item);
    return this.frame('response.output_item.added', { output_index: call.index, item: { ...item, status: 'in_progress' } });
  }

  private argsFrame(call: OpenCall, delta: string): string {
    return this.frame('response.function_call_arguments.delta', { item_id: call.id, output_index: call.index, delta });
  }

  private closeCalls(status: 'completed' | 'incomplete'): string {
    let out = '';
    for (const call of this.calls.values()) {
      if (!call.announced) out += this.announce(call) + (call.args ? this.argsFrame(call, call.args) : '');
      const item: OutputItem = { type: 'function_call', id: call.id, call_id: call.callId, name: call.name, arguments: call.args, status };
      this.output[call.index] = item;
      out += this.frame('response.function_call_arguments.done', { item_id: call.id, output_index: call.index, name: call.name, arguments: call.args });
      out += this.frame('response.output_item.done', { output_index: call.index, item });
    }
    this.calls.clear();
    return out;
  }
}

const emptyPart = (kind: OpenText['kind']) => (kind === 'message' ? { type: 'output_text', text: '', annotations: [], logprobs: [] } : { type: 'reasoning_text', text: '' });

/** The whole event sequence for a finished response (a backend that answered a stream request with JSON). */
export function eventsForResponse(response: Record<string, unknown>): string {
  let seq = 0;
  const frame = (type: string, data: Record<string, unknown>) => `event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: seq++, ...data })}\n\n`;
  const output = response.output as OutputItem[];
  const pending = { ...response, status: 'in_progress', output: [], usage: null, incomplete_details: null };
  let out = frame('response.created', { response: pending }) + frame('response.in_progress', { response: pending });
  output.forEach((item, index) => {
    if (item.type === 'function_call') {
      out += frame('response.output_item.added', { output_index: index, item: { ...item, arguments: '', status: 'in_progress' } });
      out += frame('response.function_call_arguments.delta', { item_id: item.id, output_index: index, delta: item.arguments });
      out += frame('response.function_call_arguments.done', { item_id: item.id, output_index: index, name: item.name, arguments: item.arguments });
    } else {
      const kind = item.type;
      const part = item.content[0];
      const ids = { item_id: item.id, output_index: index, content_index: 0 };
      out += frame('response.output_item.added', { output_index: index, item: { ...item, content: [], ...(kind === 'message' ? { status: 'in_progress' } : {}) } });
      out += frame('response.content_part.added', { ...ids, part: emptyPart(kind) });
      out += frame(TEXT_EVENTS[kind].delta, kind === 'message' ? { ...ids, delta: part.text, logprobs: [] } : { ...ids, delta: part.text });
      out += frame(TEXT_EVENTS[kind].done, kind === 'message' ? { ...ids, text: part.text, logprobs: [] } : { ...ids, text: part.text });
      out += frame('response.content_part.done', { ...ids, part });
    }
    out += frame('response.output_item.done', { output_index: index, item });
  });
  return out + frame(response.status === 'incomplete' ? 'response.incomplete' : 'response.completed', { response });
}
