// Chat-completions SSE → Responses API events, as the chunks arrive, numbered from 0 in
// `sequence_number`: response.created, response.in_progress; per output item
// response.output_item.added, then for text its part added, its deltas, its .done and the part
// done (output_text for the answer; for reasoning, summary_text parts when the request asks for a
// summary, reasoning_text content otherwise: response.ts ReasoningStyle), or for a function call
// its response.function_call_arguments.delta and .done; then response.output_item.done. An item
// closes when the stream moves to another kind. Last comes response.completed (or
// response.incomplete on `length`/`content_filter`) with the whole output and usage, or
// response.failed if the backend fails mid-stream. Every frame's `event:` equals its data's
// `type`. The frames a stream sends many of, and the closing ones, are built as strings, each
// text serialised once.
import { ChatStreamReader, reasoningOf, type ChatChoiceDelta, type ToolCallDelta } from '../chat-stream.js';
import { newId } from '../new-id.js';
import { messageItem, reasoningItem, responseJson, statusOf, usageOf, type ReasoningStyle, type Shell } from './response.js';
import type { OutputItem } from './types.js';

/** How one kind of text is streamed: the events, the index field and the part they carry. */
interface TextStyle {
  delta: string;
  done: string;
  partAdded: string;
  partDone: string;
  index: 'content_index' | 'summary_index';
  logprobs: boolean;
  part(text: string): Record<string, unknown>;
  /** The same part as JSON, from the text already serialised. */
  partJson(textJson: string): string;
}

const STYLES: Record<'message' | 'reasoning_text' | 'summary', TextStyle> = {
  message: {
    delta: 'response.output_text.delta',
    done: 'response.output_text.done',
    partAdded: 'response.content_part.added',
    partDone: 'response.content_part.done',
    index: 'content_index',
    logprobs: true,
    part: (text) => ({ type: 'output_text', text, annotations: [], logprobs: [] }),
    partJson: (t) => `{"type":"output_text","text":${t},"annotations":[],"logprobs":[]}`,
  },
  reasoning_text: {
    delta: 'response.reasoning_text.delta',
    done: 'response.reasoning_text.done',
    partAdded: 'response.content_part.added',
    partDone: 'response.content_part.done',
    index: 'content_index',
    logprobs: false,
    part: (text) => ({ type: 'reasoning_text', text }),
    partJson: (t) => `{"type":"reasoning_text","text":${t}}`,
  },
  summary: {
    delta: 'response.reasoning_summary_text.delta',
    done: 'response.reasoning_summary_text.done',
    partAdded: 'response.reasoning_summary_part.added',
    partDone: 'response.reasoning_summary_part.done',
    index: 'summary_index',
    logprobs: false,
    part: (text) => ({ type: 'summary_text', text }),
    partJson: (t) => `{"type":"summary_text","text":${t}}`,
  },
};

const styleOf = (kind: 'message' | 'reasoning', r: ReasoningStyle): TextStyle =>
  kind === 'message' ? STYLES.message : r.summary ? STYLES.summary : STYLES.reasoning_text;

/** An item as output_item.added announces it, before any text. */
function openingItem(kind: 'message' | 'reasoning', id: string, r: ReasoningStyle): Record<string, unknown> {
  if (kind === 'message') return { type: 'message', id, status: 'in_progress', role: 'assistant', content: [] };
  return r.summary ? { type: 'reasoning', id, summary: [] } : { type: 'reasoning', id, summary: [], content: [] };
}

interface OpenText {
  kind: 'reasoning' | 'message';
  style: TextStyle;
  id: string;
  index: number;
  parts: string[];
}
interface OpenCall {
  id: string;
  callId: string;
  name: string;
  args: string;
  index: number;
  announced: boolean;
}

export class ResponsesStreamTranslator extends ChatStreamReader {
  private seq = 0;
  private readonly output: OutputItem[] = [];
  /** Each finished item serialised once: the closing response's output is these joined. */
  private readonly outputJson: string[] = [];
  private open: OpenText | null = null;
  private readonly calls = new Map<number, OpenCall>();
  private finishReason: string | null = null;
  private outputChars = 0;

  constructor(
    private readonly shell: Shell,
    private readonly onOutput?: (output: OutputItem[]) => void,
  ) {
    super();
  }

  start(): string {
    const response = responseJson(this.shell, 'in_progress', '[]', null);
    return this.responseFrame('response.created', response) + this.responseFrame('response.in_progress', response);
  }

  protected choice(choice: ChatChoiceDelta): string {
    let out = '';
    const delta = choice.delta ?? {};
    const reasoning = reasoningOf(delta);
    if (reasoning) out += this.text('reasoning', reasoning);
    if (typeof delta.content === 'string' && delta.content) out += this.text('message', delta.content);
    if (Array.isArray(delta.tool_calls)) for (const call of delta.tool_calls) if (call && typeof call === 'object') out += this.callDelta(call);
    if (choice.finish_reason) this.finishReason = choice.finish_reason;
    return out;
  }

  protected closing(): string {
    const { status, incomplete_details } = statusOf(this.finishReason);
    const out = this.closeText(status) + this.closeCalls(status);
    this.onOutput?.(this.output);
    const response = responseJson(this.shell, status, `[${this.outputJson.join(',')}]`, usageOf(this.usage, this.shell, this.outputChars), {
      incomplete_details,
    });
    return out + this.responseFrame(status === 'completed' ? 'response.completed' : 'response.incomplete', response);
  }

  /** The failure with what was said before it, items finished as far as they got. */
  protected failure(message: string): string {
    this.settle();
    const response = responseJson(this.shell, 'failed', JSON.stringify(this.output), usageOf(this.usage, this.shell, this.outputChars), {
      error: { code: 'server_error', message },
    });
    return this.responseFrame('response.failed', response);
  }

  /** A frame carrying the response object, already serialised. */
  private responseFrame(type: string, response: string): string {
    return `event: ${type}\ndata: {"type":"${type}","sequence_number":${this.seq++},"response":${response}}\n\n`;
  }

  private frame(type: string, data: Record<string, unknown>): string {
    return `event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: this.seq++, ...data })}\n\n`;
  }

  /** output_item.added / .done, the item already serialised. */
  private itemFrame(type: string, index: number, itemJson: string): string {
    return `event: ${type}\ndata: {"type":"${type}","sequence_number":${this.seq++},"output_index":${index},"item":${itemJson}}\n\n`;
  }

  /** A frame about the open text item's part, `field` already serialised ("text":…, "part":…). */
  private partFrame(type: string, o: OpenText, field: string): string {
    return `event: ${type}\ndata: {"type":"${type}","sequence_number":${this.seq++},"item_id":"${o.id}","output_index":${o.index},"${o.style.index}":0,${field}}\n\n`;
  }

  /** The most frequent frames, built without an intermediate object. */
  private deltaFrame(o: OpenText, text: string): string {
    const { delta: type, index, logprobs } = o.style;
    return `event: ${type}\ndata: {"type":"${type}","sequence_number":${this.seq++},"item_id":"${o.id}","output_index":${o.index},"${index}":0,"delta":${JSON.stringify(text)}${logprobs ? ',"logprobs":[]' : ''}}\n\n`;
  }

  private argsFrame(call: OpenCall, delta: string): string {
    return `event: response.function_call_arguments.delta\ndata: {"type":"response.function_call_arguments.delta","sequence_number":${this.seq++},"item_id":"${call.id}","output_index":${call.index},"delta":${JSON.stringify(delta)}}\n\n`;
  }

  private text(kind: OpenText['kind'], text: string): string {
    let out = '';
    if (this.open?.kind !== kind) {
      out += this.closeCalls('completed') + this.closeText('completed');
      const id = newId(kind === 'message' ? 'msg_' : 'rs_');
      const r = this.shell.reasoning;
      const o: OpenText = (this.open = { kind, style: styleOf(kind, r), id, index: this.output.length, parts: [] });
      const item = openingItem(kind, id, r);
      this.output.push(item as OutputItem); // replaced by the finished item when it closes
      out += this.itemFrame('response.output_item.added', o.index, JSON.stringify(item));
      out += this.partFrame(o.style.partAdded, o, `"part":${o.style.partJson('""')}`);
    }
    this.open!.parts.push(text);
    this.outputChars += text.length;
    return out + this.deltaFrame(this.open!, text);
  }

  /** The open text item as finished (`status` for a message), in the output. */
  private finishText(o: OpenText, status: 'completed' | 'incomplete', text = o.parts.join('')): OutputItem {
    const item = o.kind === 'message' ? messageItem(text, status, o.id) : reasoningItem(text, this.shell.reasoning, o.id);
    this.output[o.index] = item;
    return item;
  }

  /** The text item's done events; its text serialised once for all of them and the output. */
  private closeText(status: 'completed' | 'incomplete'): string {
    const o = this.open;
    if (!o) return '';
    this.open = null;
    const text = o.parts.join('');
    const item = this.finishText(o, status, text);
    const textJson = JSON.stringify(text);
    const part = o.style.partJson(textJson);
    let itemJson: string;
    if (item.type === 'message') itemJson = `{"type":"message","id":"${o.id}","status":"${status}","role":"assistant","content":[${part}]}`;
    else if (item.type === 'reasoning') {
      const token = item.encrypted_content === undefined ? '' : `,"encrypted_content":${JSON.stringify(item.encrypted_content)}`;
      itemJson = item.content
        ? `{"type":"reasoning","id":"${o.id}","summary":[],"content":[${part}]${token}}`
        : `{"type":"reasoning","id":"${o.id}","summary":[${part}]${token}}`;
    } else itemJson = JSON.stringify(item);
    this.outputJson[o.index] = itemJson;
    return (
      this.partFrame(o.style.done, o, `"text":${textJson}${o.style.logprobs ? ',"logprobs":[]' : ''}`) +
      this.partFrame(o.style.partDone, o, `"part":${part}`) +
      this.itemFrame('response.output_item.done', o.index, itemJson)
    );
  }

  private callDelta(delta: ToolCallDelta): string {
    const i = typeof delta.index === 'number' ? delta.index : 0;
    let call = this.calls.get(i);
    let out = '';
    // A new id at a known index is a new call (backends that send every call at index 0).
    if (call && delta.id && call.callId !== delta.id && call.announced) {
      out += this.closeCalls('completed');
      call = undefined;
    }
    if (!call) {
      out += this.closeText('completed');
      call = { id: newId('fc_'), callId: delta.id || newId('call_'), name: '', args: '', index: -1, announced: false };
      this.calls.set(i, call);
    }
    const fn = delta.function;
    if (typeof fn?.name === 'string') call.name += fn.name;
    const args = typeof fn?.arguments === 'string' ? fn.arguments : '';
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

  private closeCalls(status: 'completed' | 'incomplete'): string {
    let out = '';
    for (const call of this.calls.values()) {
      if (!call.announced) out += this.announce(call) + (call.args ? this.argsFrame(call, call.args) : '');
      const item: OutputItem = { type: 'function_call', id: call.id, call_id: call.callId, name: call.name, arguments: call.args, status };
      this.output[call.index] = item;
      const itemJson = (this.outputJson[call.index] = JSON.stringify(item));
      out += this.frame('response.function_call_arguments.done', { item_id: call.id, output_index: call.index, name: call.name, arguments: call.args });
      out += this.itemFrame('response.output_item.done', call.index, itemJson);
    }
    this.calls.clear();
    return out;
  }

  /** Before a failure: what the open items hold, put in the output (no events: the stream ends). */
  private settle(): void {
    if (this.open) this.finishText(this.open, 'incomplete');
    this.open = null;
    for (const call of this.calls.values()) {
      const item: OutputItem = { type: 'function_call', id: call.id, call_id: call.callId, name: call.name, arguments: call.args, status: 'incomplete' };
      if (call.announced) this.output[call.index] = item;
    }
    this.calls.clear();
  }
}

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
      const r: ReasoningStyle = { summary: item.type === 'reasoning' && !item.content, encrypted: false };
      const style = styleOf(item.type, r);
      const text = item.type === 'message' ? item.content[0].text : (item.content ?? item.summary)[0].text;
      const ids = { item_id: item.id, output_index: index, [style.index]: 0 };
      out += frame('response.output_item.added', { output_index: index, item: openingItem(item.type, item.id, r) });
      out += frame(style.partAdded, { ...ids, part: style.part('') });
      out += frame(style.delta, style.logprobs ? { ...ids, delta: text, logprobs: [] } : { ...ids, delta: text });
      out += frame(style.done, style.logprobs ? { ...ids, text, logprobs: [] } : { ...ids, text });
      out += frame(style.partDone, { ...ids, part: style.part(text) });
    }
    out += frame('response.output_item.done', { output_index: index, item });
  });
  return out + frame(response.status === 'incomplete' ? 'response.incomplete' : 'response.completed', { response });
}
