// Messages request → chat-completions request, and the token estimate of count_tokens.
import type { Block, ImageBlock, MessagesRequest, TextBlock, ToolResultBlock, ToolUseBlock } from './types.js';

export interface ChatOptions {
  /** The model name to send (an alias already resolved for the chosen endpoint). */
  model: string;
  /** The backend takes top_k in chat requests. */
  topK: boolean;
  /** The backend can report usage at the end of a stream (stream_options.include_usage). */
  streamUsage: boolean;
}

type ChatPart = { type: 'text'; text: string } | { type: 'image_url'; image_url: { url: string } };
type ChatMessage = Record<string, unknown>;

const textOf = (content: string | Block[] | undefined): string =>
  typeof content === 'string' ? content : (content ?? []).filter((b): b is TextBlock => b.type === 'text').map((b) => b.text).join('\n');

function imageUrl(block: ImageBlock): string {
  const s = block.source;
  return s.type === 'url' ? s.url : `data:${s.media_type};base64,${s.data}`;
}

function toolResultContent(block: ToolResultBlock): string {
  const text = textOf(block.content);
  return block.is_error ? `Error: ${text}` : text;
}

/** One messages-API turn → chat messages (tool results become role `tool` messages, first). */
function convertTurn(role: 'user' | 'assistant', content: string | Block[]): ChatMessage[] {
  if (typeof content === 'string') return [{ role, content }];
  if (role === 'assistant') {
    const text = content.filter((b): b is TextBlock => b.type === 'text').map((b) => b.text).join('');
    const calls = content.filter((b): b is ToolUseBlock => b.type === 'tool_use').map((b) => ({
      id: b.id, type: 'function', function: { name: b.name, arguments: JSON.stringify(b.input ?? {}) },
    }));
    return [{ role: 'assistant', content: text || (calls.length ? null : ''), ...(calls.length ? { tool_calls: calls } : {}) }];
  }
  const out: ChatMessage[] = [];
  for (const b of content) if (b.type === 'tool_result') out.push({ role: 'tool', tool_call_id: (b as ToolResultBlock).tool_use_id, content: toolResultContent(b as ToolResultBlock) });
  const parts: ChatPart[] = [];
  for (const b of content) {
    if (b.type === 'text') parts.push({ type: 'text', text: (b as TextBlock).text });
    else if (b.type === 'image') parts.push({ type: 'image_url', image_url: { url: imageUrl(b as ImageBlock) } });
  }
  if (parts.length) out.push({ role: 'user', content: parts.every((p) => p.type === 'text') ? parts.map((p) => (p as { text: string }).text).join('\n') : parts });
  return out;
}

function toolChoice(choice: MessagesRequest['tool_choice']): unknown {
  const c = typeof choice === 'string' ? { type: choice } : choice;
  if (!c) return undefined;
  if (c.type === 'tool') return { type: 'function', function: { name: (c as { name: string }).name } };
  return { auto: 'auto', any: 'required', none: 'none' }[c.type as 'auto' | 'any' | 'none'];
}

export function toChatRequest(req: MessagesRequest, o: ChatOptions): Record<string, unknown> {
  const messages: ChatMessage[] = [];
  const system = textOf(req.system);
  if (system) messages.push({ role: 'system', content: system });
  for (const m of req.messages) messages.push(...convertTurn(m.role, m.content));
  const chat: Record<string, unknown> = { model: o.model, messages, max_tokens: req.max_tokens };
  if (req.temperature !== undefined) chat.temperature = req.temperature;
  if (req.top_p !== undefined) chat.top_p = req.top_p;
  if (req.top_k !== undefined && o.topK) chat.top_k = req.top_k;
  if (req.stop_sequences?.length) chat.stop = req.stop_sequences;
  if (req.tools?.length) {
    chat.tools = req.tools.map((t) => ({ type: 'function', function: { name: t.name, ...(t.description ? { description: t.description } : {}), parameters: t.input_schema ?? { type: 'object', properties: {} } } }));
  }
  const choice = toolChoice(req.tool_choice);
  if (choice !== undefined && req.tools?.length) chat.tool_choice = choice;
  if (req.metadata?.user_id) chat.user = req.metadata.user_id;
  if (req.stream) {
    chat.stream = true;
    if (o.streamUsage) chat.stream_options = { include_usage: true };
  }
  return chat;
}

/**
 * The spec's estimate: total characters / 4 (integer) over the system text, message text, tool
 * names and inputs (tool definitions and tool_use blocks), and tool result content.
 */
export function estimateInputTokens(req: MessagesRequest): number {
  let chars = textOf(req.system).length;
  for (const t of req.tools ?? []) chars += t.name.length + JSON.stringify(t.input_schema ?? {}).length;
  for (const m of req.messages) {
    if (typeof m.content === 'string') {
      chars += m.content.length;
      continue;
    }
    for (const b of m.content) {
      if (b.type === 'text') chars += (b as TextBlock).text.length;
      else if (b.type === 'tool_use') chars += (b as ToolUseBlock).name.length + JSON.stringify((b as ToolUseBlock).input ?? {}).length;
      else if (b.type === 'tool_result') chars += textOf((b as ToolResultBlock).content).length;
    }
  }
  return Math.floor(chars / 4);
}

/** Why a body is not a messages request the translator can take, or undefined when it is. */
export function invalidReason(body: unknown, maxTokensRequired = true): string | undefined {
  const b = body as Partial<MessagesRequest> | null;
  if (!b || typeof b !== 'object' || Array.isArray(b)) return 'the body must be a JSON object';
  if (typeof b.model !== 'string' || !b.model) return 'model: a model name is required';
  if (!Array.isArray(b.messages)) return 'messages: an array of {role, content} is required';
  for (const [i, m] of b.messages.entries()) {
    if (!m || (m.role !== 'user' && m.role !== 'assistant')) return `messages[${i}].role: must be user or assistant`;
    if (typeof m.content !== 'string' && !Array.isArray(m.content)) return `messages[${i}].content: must be a string or an array of content blocks`;
  }
  if ((maxTokensRequired || b.max_tokens !== undefined) && (typeof b.max_tokens !== 'number' || !Number.isInteger(b.max_tokens) || b.max_tokens < 1)) return 'max_tokens: a positive integer is required';
  if (b.stop_sequences !== undefined && (!Array.isArray(b.stop_sequences) || b.stop_sequences.some((s) => typeof s !== 'string'))) return 'stop_sequences: must be an array of strings';
  if (b.tools !== undefined && (!Array.isArray(b.tools) || b.tools.some((t) => !t || typeof t.name !== 'string'))) return 'tools: each tool needs a name';
  return undefined;
}
