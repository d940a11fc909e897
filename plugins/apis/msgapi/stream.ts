// Chat-completions SSE → messages-API named events, as the chunks arrive:
// message_start; per block content_block_start, content_block_delta…, content_block_stop (a
// block closes when the stream switches between thinking, text and tool use; tool arguments
// are buffered until the call is complete); message_delta; message_stop. Every frame's
// `event:` equals its data's `type`.
import { ChatStreamReader, reasoningOf, type ChatChoiceDelta, type ToolCallDelta } from '../chat-stream.js';
import { newId } from '../new-id.js';
import { parseArguments, stopReason } from './response.js';
import type { Message } from './types.js';

export function sse(type: string, data: Record<string, unknown>): string {
  return `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`;
}

/** The most frequent frame, built without an intermediate object: one JSON.stringify of the text. */
function deltaFrame(index: number, kind: 'text_delta' | 'thinking_delta', text: string): string {
  const field = kind === 'text_delta' ? 'text' : 'thinking';
  return `event: content_block_delta\ndata: {"type":"content_block_delta","index":${index},"delta":{"type":"${kind}","${field}":${JSON.stringify(text)}}}\n\n`;
}

interface PendingTool {
  id: string;
  name: string;
  args: string;
}

export type { Usage } from '../chat-stream.js';

export interface StreamOptions {
  model: string;
  inputTokens: number;
  stopSequences?: string[];
}

export class StreamTranslator extends ChatStreamReader {
  private index = -1;
  private open: 'text' | 'thinking' | null = null;
  private pinged = false;
  private readonly tools = new Map<number, PendingTool>();
  private hadTools = false;
  private finishReason: string | null = null;
  private matched: unknown = undefined;
  private outputChars = 0;

  constructor(private readonly o: StreamOptions) {
    super();
  }

  start(id = newId('msg_01')): string {
    return sse('message_start', {
      message: {
        id,
        type: 'message',
        role: 'assistant',
        model: this.o.model,
        content: [],
        stop_reason: null,
        stop_sequence: null,
        usage: { input_tokens: this.o.inputTokens, output_tokens: 0 },
      },
    });
  }

  protected choice(choice: ChatChoiceDelta): string {
    let out = '';
    const delta = choice.delta ?? {};
    const thinking = reasoningOf(delta);
    if (thinking) out += this.textual('thinking', thinking);
    if (typeof delta.content === 'string' && delta.content) out += this.textual('text', delta.content);
    if (Array.isArray(delta.tool_calls)) for (const call of delta.tool_calls) if (call && typeof call === 'object') out += this.toolDelta(call);
    if (choice.finish_reason) {
      this.finishReason = choice.finish_reason;
      this.matched = choice.stop_reason;
      out += this.flushTools();
    }
    return out;
  }

  /** The backend failed mid-stream: an error event. */
  protected failure(message: string): string {
    return sse('error', { error: { type: 'api_error', message } });
  }

  private blockStart(block: Record<string, unknown>): string {
    this.index++;
    let out = sse('content_block_start', { index: this.index, content_block: block });
    if (!this.pinged) {
      this.pinged = true;
      out += sse('ping', {});
    }
    return out;
  }

  private closeOpen(): string {
    if (!this.open) return '';
    this.open = null;
    return sse('content_block_stop', { index: this.index });
  }

  private textual(kind: 'text' | 'thinking', text: string): string {
    let out = this.flushTools();
    if (this.open !== kind) {
      out += this.closeOpen();
      out += this.blockStart(kind === 'text' ? { type: 'text', text: '' } : { type: 'thinking', thinking: '', signature: '' });
      this.open = kind;
    }
    this.outputChars += text.length;
    return out + deltaFrame(this.index, kind === 'text' ? 'text_delta' : 'thinking_delta', text);
  }

  private toolDelta(call: ToolCallDelta): string {
    const i = call.index ?? 0;
    let out = '';
    let tool = this.tools.get(i);
    // A new id at a known index is a new call (backends that send every call at index 0).
    if (tool && call.id && tool.id !== call.id && tool.name) {
      out += this.flushTools();
      tool = undefined;
    }
    if (!tool) {
      // A new call: the earlier ones are complete.
      out += this.flushTools();
      tool = { id: call.id || newId('toolu_01'), name: '', args: '' };
      this.tools.set(i, tool);
      this.hadTools = true;
    }
    if (call.function?.name) tool.name += call.function.name;
    if (call.function?.arguments) tool.args += call.function.arguments;
    return out;
  }

  private flushTools(): string {
    if (this.tools.size === 0) return '';
    let out = this.closeOpen();
    for (const t of this.tools.values()) {
      const args = t.args.trim() ? JSON.stringify(parseArguments(t.args)) : '{}';
      this.outputChars += t.args.length;
      out += this.blockStart({ type: 'tool_use', id: t.id, name: t.name, input: {} });
      out += sse('content_block_delta', { index: this.index, delta: { type: 'input_json_delta', partial_json: args } });
      out += sse('content_block_stop', { index: this.index });
    }
    this.tools.clear();
    return out;
  }

  protected closing(): string {
    const out = this.flushTools() + this.closeOpen();
    const { reason, sequence } = stopReason(this.finishReason, this.matched, this.o.stopSequences, this.hadTools);
    const reported = this.usage;
    const usage: Record<string, number> = { output_tokens: reported?.output ?? Math.floor(this.outputChars / 4) };
    if (reported?.input !== undefined) usage.input_tokens = reported.input;
    return out + sse('message_delta', { delta: { stop_reason: reason, stop_sequence: sequence }, usage }) + sse('message_stop', {});
  }
}

/** The whole event sequence for a finished message (a backend that answered a stream request with JSON). */
export function eventsForMessage(m: Message): string {
  let out = sse('message_start', {
    message: { ...m, content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: m.usage.input_tokens, output_tokens: 0 } },
  });
  m.content.forEach((b, index) => {
    if (b.type === 'text') {
      out += sse('content_block_start', { index, content_block: { type: 'text', text: '' } });
      out += sse('content_block_delta', { index, delta: { type: 'text_delta', text: (b as { text: string }).text } });
    } else if (b.type === 'thinking') {
      out += sse('content_block_start', { index, content_block: { type: 'thinking', thinking: '', signature: '' } });
      out += sse('content_block_delta', { index, delta: { type: 'thinking_delta', thinking: (b as { thinking: string }).thinking } });
    } else if (b.type === 'tool_use') {
      const t = b as { id: string; name: string; input: unknown };
      out += sse('content_block_start', { index, content_block: { type: 'tool_use', id: t.id, name: t.name, input: {} } });
      out += sse('content_block_delta', { index, delta: { type: 'input_json_delta', partial_json: JSON.stringify(t.input) } });
    }
    out += sse('content_block_stop', { index });
  });
  return (
    out +
    sse('message_delta', { delta: { stop_reason: m.stop_reason, stop_sequence: m.stop_sequence }, usage: { output_tokens: m.usage.output_tokens } }) +
    sse('message_stop', {})
  );
}
