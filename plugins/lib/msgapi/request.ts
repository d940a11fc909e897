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

const TOOL_CHOICES = new Map([['auto', 'auto'], ['any', 'required'], ['none', 'none']]);

function toolChoice(choice: MessagesRequest['tool_choice']): unknown {
  const c = typeof choice === 'string' ? { type: choice } : choice;
  if (!c) return undefined;
  if (c.type === 'tool') return { type: 'function', function: { name: (c as { name: string }).name } };
  return TOOL_CHOICES.get(c.type);
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

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** What is wrong with one content block (the fields the translator reads), or undefined. */
function blockProblem(b: unknown, where: string): string | undefined {
  if (!isObject(b) || typeof b.type !== 'string') return `${where}: a content block is an object with a string type`;
  switch (b.type) {
    case 'text':
      return typeof b.text === 'string' ? undefined : `${where}.text: must be a string`;
    case 'image': {
      const src = b.source;
      const ok = isObject(src) && (src.type === 'url' ? typeof src.url === 'string' : typeof src.data === 'string' && typeof src.media_type === 'string');
      return ok ? undefined : `${where}.source: an image needs {type: base64, media_type, data} or {type: url, url}`;
    }
    case 'tool_use':
      return typeof b.name === 'string' ? undefined : `${where}.name: a tool_use block needs a name`;
    case 'tool_result':
      return b.content === undefined || typeof b.content === 'string' ? undefined : blocksProblem(b.content, `${where}.content`);
    default:
      return undefined; // blocks the translator does not read are passed over
  }
}

function blocksProblem(content: unknown, where: string): string | undefined {
  if (!Array.isArray(content)) return `${where}: must be a string or an array of content blocks`;
  for (const [i, b] of content.entries()) {
    const why = blockProblem(b, `${where}[${i}]`);
    if (why) return why;
  }
  return undefined;
}

/** Why a body is not a messages request the translator can take, or undefined when it is. */
export function invalidReason(body: unknown, maxTokensRequired = true): string | undefined {
  if (!isObject(body)) return 'the body must be a JSON object';
  const b = body as Partial<MessagesRequest>;
  if (typeof b.model !== 'string' || !b.model) return 'model: a model name is required';
  if (!Array.isArray(b.messages)) return 'messages: an array of {role, content} is required';
  for (const [i, m] of b.messages.entries()) {
    if (!isObject(m) || (m.role !== 'user' && m.role !== 'assistant')) return `messages[${i}].role: must be user or assistant`;
    if (typeof m.content !== 'string') {
      const why = blocksProblem(m.content, `messages[${i}].content`);
      if (why) return why;
    }
  }
  if (b.system !== undefined && typeof b.system !== 'string') {
    const why = blocksProblem(b.system, 'system');
    if (why) return why;
  }
  if ((maxTokensRequired || b.max_tokens !== undefined) && (typeof b.max_tokens !== 'number' || !Number.isInteger(b.max_tokens) || b.max_tokens < 1)) return 'max_tokens: a positive integer is required';
  if (b.stop_sequences !== undefined && (!Array.isArray(b.stop_sequences) || b.stop_sequences.some((s) => typeof s !== 'string'))) return 'stop_sequences: must be an array of strings';
  if (b.tools !== undefined && (!Array.isArray(b.tools) || b.tools.some((t) => !isObject(t) || typeof t.name !== 'string'))) return 'tools: each tool needs a name';
  const choice = b.tool_choice as unknown;
  if (choice !== undefined && typeof choice !== 'string' && !(isObject(choice) && typeof choice.type === 'string')) return 'tool_choice: must be auto, any, none or {type, name}';
  return undefined;
}
