// Chat-completions reply → messages-API reply, and the pieces the stream translator shares.
import type { Block, Message, StopReason } from './types.js';
import { msgapiErrorType } from '../../../engine/api.js';
import { newId } from '../new-id.js';
import { backendErrorMessage } from '../backend-error.js';

/** finish_reason → stop_reason; a stop caused by one of the request's stop sequences says which. */
export function stopReason(
  finish: string | null | undefined,
  matched: unknown,
  stopSequences: readonly string[] | undefined,
  hadToolCalls: boolean,
): { reason: StopReason; sequence: string | null } {
  if (finish === 'tool_calls' || finish === 'function_call' || (hadToolCalls && (finish === 'stop' || !finish))) return { reason: 'tool_use', sequence: null };
  if (finish === 'length') return { reason: 'max_tokens', sequence: null };
  if (finish === 'content_filter') return { reason: 'refusal', sequence: null };
  if (typeof matched === 'string' && stopSequences?.includes(matched)) return { reason: 'stop_sequence', sequence: matched };
  return { reason: 'end_turn', sequence: null };
}

/** Tool arguments as an object; text that is not a JSON object is kept under `_raw`. */
export function parseArguments(args: unknown): unknown {
  if (args && typeof args === 'object') return args;
  if (typeof args !== 'string' || args.trim() === '') return {};
  try {
    const v = JSON.parse(args);
    return v && typeof v === 'object' && !Array.isArray(v) ? v : { _raw: args };
  } catch {
    return { _raw: args };
  }
}

interface ChatChoice {
  message?: {
    content?: string | null;
    reasoning_content?: string;
    reasoning?: string;
    tool_calls?: Array<{ id?: string; function?: { name?: string; arguments?: unknown } }>;
  };
  finish_reason?: string | null;
  stop_reason?: unknown;
}
interface ChatReply {
  model?: string;
  choices?: ChatChoice[];
  usage?: { prompt_tokens?: number; completion_tokens?: number };
}

export function toMessage(reply: ChatReply, fallback: { model: string; inputTokens: number; stopSequences?: string[] }): Message {
  const choice = reply.choices?.[0] ?? {};
  const msg = choice.message ?? {};
  const content: Block[] = [];
  const thinking = msg.reasoning_content ?? msg.reasoning;
  if (thinking) content.push({ type: 'thinking', thinking, signature: '' });
  if (msg.content) content.push({ type: 'text', text: msg.content });
  for (const call of msg.tool_calls ?? []) {
    content.push({ type: 'tool_use', id: call.id || newId('toolu_01'), name: call.function?.name ?? '', input: parseArguments(call.function?.arguments) });
  }
  const { reason, sequence } = stopReason(choice.finish_reason, choice.stop_reason, fallback.stopSequences, (msg.tool_calls?.length ?? 0) > 0);
  const outputChars =
    (msg.content ?? '').length + (thinking ?? '').length + (msg.tool_calls ?? []).reduce((n, c) => n + String(c.function?.arguments ?? '').length, 0);
  return {
    id: newId('msg_01'),
    type: 'message',
    role: 'assistant',
    content,
    model: reply.model ?? fallback.model,
    stop_reason: reason,
    stop_sequence: sequence,
    usage: { input_tokens: reply.usage?.prompt_tokens ?? fallback.inputTokens, output_tokens: reply.usage?.completion_tokens ?? Math.floor(outputChars / 4) },
  };
}

/** A backend error in the messages API's error shape (the backend's status is kept by the caller). */
export function errorReply(status: number, body: string): { type: 'error'; error: { type: string; message: string } } {
  return { type: 'error', error: { type: msgapiErrorType(status), message: backendErrorMessage(status, body) } };
}

/** Already the messages API's error shape: {"type":"error","error":{"type":"…","message":"…"}}. */
export function isMessagesError(body: string): boolean {
  try {
    const j = JSON.parse(body);
    return j?.type === 'error' && typeof j.error?.type === 'string' && typeof j.error.message === 'string';
  } catch {
    return false;
  }
}
