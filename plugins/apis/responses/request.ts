// Responses request → chat-completions request. `requestProblem` names the field a translation
// cannot read (a 400 before any backend); what chat-completions has no form for — hosted tools
// (web search, file search…), file inputs, item references, unknown fields — is dropped and named
// in `dropped` when the caller collects them (a debug log).
//
// The messages keep to what strict chat templates accept: the instructions and every leading
// system or developer message become one system message; a system or developer message later on
// becomes user text in <system-reminder> tags where it stands (hoisting it would change the
// prompt prefix); consecutive user messages are merged (Codex sends two in a row); a function
// call joins the assistant message before it; reasoning sent back rides on the next assistant
// message as `reasoning_content`, the field engines' templates read.
import { isObject } from '../../../engine/api.js';
import type { ContentPart, FunctionCallItem, FunctionCallOutputItem, FunctionTool, InputItem, MessageItem, ReasoningItem, ResponsesRequest } from './types.js';

export interface ChatOptions {
  /** The model name to send (an alias already resolved for the chosen endpoint). */
  model: string;
  /** The backend can report usage at the end of a stream (stream_options.include_usage). */
  streamUsage: boolean;
  /** The `reasoning_effort` levels the engine's chat route accepts (profile request.reasoning_effort). */
  effortLevels: readonly string[];
  /** Earlier reasoning may go back as `reasoning_content` (local engines' templates read it;
   *  hosted services such as DeepSeek's refuse it). */
  reasoningHistory: boolean;
  /** Collects what was dropped, when given. */
  dropped?: string[];
}

type ChatMessage = Record<string, unknown> & { role: string };
type ChatPart = { type: 'text'; text: string } | { type: 'image_url'; image_url: { url: string; detail?: string } };

/** The request fields the translator reads or answers for; any other is dropped. */
const KNOWN_FIELDS = new Set([
  'model',
  'input',
  'instructions',
  'previous_response_id',
  'tools',
  'tool_choice',
  'parallel_tool_calls',
  'max_output_tokens',
  'temperature',
  'top_p',
  'stream',
  'store',
  'text',
  'reasoning',
  'metadata',
  'user',
  'include',
  'truncation',
  'prompt_cache_key',
  'service_tier',
]);
const ROLES = new Set(['user', 'assistant', 'system', 'developer']);

/** Why a Responses request cannot be translated, or undefined when it can. */
export function requestProblem(body: Record<string, unknown>): string | undefined {
  const input = body.input;
  if (input === undefined && typeof body.previous_response_id !== 'string') return 'input: a string or an array of input items is required';
  if (input !== undefined && typeof input !== 'string') {
    if (!Array.isArray(input)) return 'input: must be a string or an array of input items';
    for (const [i, item] of input.entries()) {
      const why = itemProblem(item, `input[${i}]`);
      if (why) return why;
    }
  }
  if (body.instructions !== undefined && body.instructions !== null && typeof body.instructions !== 'string') return 'instructions: must be a string';
  const max = body.max_output_tokens;
  if (max !== undefined && max !== null && (typeof max !== 'number' || !Number.isInteger(max) || max < 1))
    return 'max_output_tokens: must be a positive integer';
  const tools = body.tools;
  if (tools !== undefined) {
    if (!Array.isArray(tools)) return 'tools: must be an array';
    for (const [i, t] of tools.entries()) {
      if (!isObject(t) || typeof t.type !== 'string') return `tools[${i}]: a tool is an object with a string type`;
      if (t.type === 'function' && typeof t.name !== 'string') return `tools[${i}].name: a function tool needs a name`;
    }
  }
  const format = isObject(body.text) ? body.text.format : undefined;
  if (format !== undefined && (!isObject(format) || typeof format.type !== 'string')) return 'text.format: must be {type: text | json_object | json_schema}';
  if (isObject(format) && format.type === 'json_schema' && !isObject(format.schema)) return 'text.format.schema: a json_schema format needs a schema object';
  return undefined;
}

function itemProblem(item: unknown, where: string): string | undefined {
  if (!isObject(item)) return `${where}: an input item is an object`;
  const type = item.type ?? 'message';
  switch (type) {
    case 'message':
      if (typeof item.role !== 'string' || !ROLES.has(item.role)) return `${where}.role: must be user, assistant, system or developer`;
      if (typeof item.content === 'string') return undefined;
      if (!Array.isArray(item.content)) return `${where}.content: must be a string or an array of content parts`;
      for (const [j, p] of item.content.entries()) {
        if (!isObject(p) || typeof p.type !== 'string') return `${where}.content[${j}]: a content part is an object with a string type`;
        if ((p.type === 'input_text' || p.type === 'output_text') && typeof p.text !== 'string') return `${where}.content[${j}].text: must be a string`;
        if (p.type === 'input_image' && typeof p.image_url !== 'string')
          return `${where}.content[${j}].image_url: an image needs a URL or a data: URL (file ids need the provider's file store)`;
      }
      return undefined;
    case 'function_call':
      if (typeof item.call_id !== 'string' || typeof item.name !== 'string') return `${where}: a function_call item needs call_id and name`;
      return typeof item.arguments === 'string' ? undefined : `${where}.arguments: must be a string of JSON`;
    case 'function_call_output':
      if (typeof item.call_id !== 'string') return `${where}.call_id: a function_call_output item needs the call_id it answers`;
      if (typeof item.output === 'string') return undefined;
      return Array.isArray(item.output) && item.output.every(isObject) ? undefined : `${where}.output: must be a string or an array of content parts`;
    case 'reasoning':
      for (const key of ['content', 'summary'] as const) {
        const v = item[key];
        if (v !== undefined && v !== null && !(Array.isArray(v) && v.every(isObject))) return `${where}.${key}: must be an array of {type, text} parts`;
      }
      return item.encrypted_content === undefined || item.encrypted_content === null || typeof item.encrypted_content === 'string'
        ? undefined
        : `${where}.encrypted_content: must be a string`;
    default:
      return undefined; // other item types are dropped
  }
}

const partsText = (parts: ContentPart[]): string =>
  parts.map((p) => (typeof p.text === 'string' ? p.text : typeof p.refusal === 'string' ? p.refusal : '')).join('');

/** Reasoning this gateway handed out as `encrypted_content` (clients that ask for it, Codex, send
 *  it back and may leave the text out): the text, marked and base64-encoded, not encrypted. */
const OWN_REASONING = 'gw-reasoning:';
export const reasoningToken = (text: string): string => OWN_REASONING + Buffer.from(text, 'utf8').toString('base64');

/** The text of a reasoning item sent back: its content, else its summary, else what this gateway
 *  put in its encrypted_content. */
function reasoningText(r: ReasoningItem): string {
  for (const parts of [r.content, r.summary]) {
    const text = Array.isArray(parts) ? partsText(parts as ContentPart[]) : '';
    if (text) return text;
  }
  const token = r.encrypted_content;
  return typeof token === 'string' && token.startsWith(OWN_REASONING) ? Buffer.from(token.slice(OWN_REASONING.length), 'base64').toString('utf8') : '';
}

function userContent(content: string | ContentPart[], dropped: string[] | undefined): string | ChatPart[] {
  if (typeof content === 'string') return content;
  const parts: ChatPart[] = [];
  for (const p of content) {
    if (p.type === 'input_text' || p.type === 'output_text' || p.type === 'text') parts.push({ type: 'text', text: p.text ?? '' });
    else if (p.type === 'input_image' && p.image_url)
      parts.push({ type: 'image_url', image_url: p.detail && p.detail !== 'auto' ? { url: p.image_url, detail: p.detail } : { url: p.image_url } });
    else dropped?.push(`content part ${p.type}`);
  }
  return parts.every((p) => p.type === 'text') ? parts.map((p) => (p as { text: string }).text).join('\n') : parts;
}

const asParts = (c: string | ChatPart[]): ChatPart[] => (typeof c === 'string' ? [{ type: 'text', text: c }] : c);

/** The chat messages for a list of input items (after the instructions). */
function messagesOf(items: readonly InputItem[], instructions: string | undefined, reasoningHistory: boolean, dropped: string[] | undefined): ChatMessage[] {
  const out: ChatMessage[] = [];
  const system: string[] = instructions ? [instructions] : [];
  let reasoning = '';
  let leading = true;
  const assistant = (): ChatMessage => {
    const last = out.at(-1);
    if (last?.role === 'assistant') return last;
    const m: ChatMessage = { role: 'assistant', content: null };
    out.push(m);
    return m;
  };
  const carryReasoning = (m: ChatMessage) => {
    if (!reasoning) return;
    if (reasoningHistory) m.reasoning_content = typeof m.reasoning_content === 'string' ? m.reasoning_content + reasoning : reasoning;
    else dropped?.push('reasoning sent back (the engine is a hosted service)');
    reasoning = '';
  };
  const user = (content: string | ChatPart[]) => {
    if (reasoning) dropped?.push('reasoning with no assistant message after it');
    reasoning = ''; // reasoning belongs to the assistant turn it preceded, never a later one
    pushUser(out, content);
  };
  for (const item of items) {
    const type = (item as { type?: string }).type ?? 'message';
    if (type === 'message') {
      const m = item as MessageItem;
      if (m.role === 'system' || m.role === 'developer') {
        const text = typeof m.content === 'string' ? m.content : partsText(m.content);
        if (leading) system.push(text);
        else user(`<system-reminder>\n${text}\n</system-reminder>`);
        continue;
      }
      leading = false;
      if (m.role === 'user') user(userContent(m.content, dropped));
      else {
        const text = typeof m.content === 'string' ? m.content : partsText(m.content);
        const a = assistant();
        a.content = typeof a.content === 'string' && a.content ? `${a.content}\n\n${text}` : text;
        carryReasoning(a);
      }
    } else if (type === 'function_call') {
      leading = false;
      const c = item as FunctionCallItem;
      const a = assistant();
      ((a.tool_calls ??= []) as unknown[]).push({ id: c.call_id, type: 'function', function: { name: c.name, arguments: c.arguments } });
      carryReasoning(a);
    } else if (type === 'function_call_output') {
      leading = false;
      const o = item as FunctionCallOutputItem;
      out.push({ role: 'tool', tool_call_id: o.call_id, content: typeof o.output === 'string' ? o.output : partsText(o.output) });
    } else if (type === 'reasoning') {
      reasoning += reasoningText(item as ReasoningItem);
    } else dropped?.push(`input item ${type}`);
  }
  if (reasoning) dropped?.push('reasoning with no assistant message after it');
  if (system.length) out.unshift({ role: 'system', content: system.join('\n\n') });
  return out;
}

/** A user message, merged into the one before it when that is a user message too. */
function pushUser(out: ChatMessage[], content: string | ChatPart[]): void {
  const last = out.at(-1);
  if (last?.role !== 'user') {
    out.push({ role: 'user', content });
    return;
  }
  const before = last.content as string | ChatPart[];
  last.content = typeof before === 'string' && typeof content === 'string' ? `${before}\n\n${content}` : [...asParts(before), ...asParts(content)];
}

function toolChoice(choice: ResponsesRequest['tool_choice']): unknown {
  if (choice === 'auto' || choice === 'none' || choice === 'required') return choice;
  if (isObject(choice) && choice.type === 'function' && typeof choice.name === 'string') return { type: 'function', function: { name: choice.name } };
  return undefined;
}

function responseFormat(format: NonNullable<ResponsesRequest['text']>['format']): unknown {
  if (format?.type === 'json_object') return { type: 'json_object' };
  if (format?.type !== 'json_schema') return undefined;
  const schema: Record<string, unknown> = { name: format.name ?? 'response', schema: format.schema };
  if (format.strict !== undefined) schema.strict = format.strict;
  if (format.description) schema.description = format.description;
  return { type: 'json_schema', json_schema: schema };
}

/** The chat-completions body for a Responses request whose input items are `items` (the stored
 *  conversation before it, when it continues one, then its own input). */
export function toChatRequest(req: ResponsesRequest, items: readonly InputItem[], o: ChatOptions): Record<string, unknown> {
  const { dropped } = o;
  if (dropped) for (const key of Object.keys(req)) if (!KNOWN_FIELDS.has(key)) dropped.push(`field ${key}`);
  const chat: Record<string, unknown> = { model: o.model, messages: messagesOf(items, req.instructions ?? undefined, o.reasoningHistory, dropped) };
  if (typeof req.max_output_tokens === 'number') chat.max_tokens = req.max_output_tokens;
  if (typeof req.temperature === 'number') chat.temperature = req.temperature;
  if (typeof req.top_p === 'number') chat.top_p = req.top_p;
  const tools: unknown[] = [];
  for (const t of req.tools ?? []) {
    if (t.type !== 'function') {
      dropped?.push(`tool ${t.type}`);
      continue;
    }
    const f = t as FunctionTool;
    const fn: Record<string, unknown> = { name: f.name, parameters: f.parameters ?? { type: 'object', properties: {} } };
    if (f.description) fn.description = f.description;
    if (f.strict !== undefined && f.strict !== null) fn.strict = f.strict;
    tools.push({ type: 'function', function: fn });
  }
  if (tools.length) {
    chat.tools = tools;
    const choice = toolChoice(req.tool_choice);
    if (choice !== undefined) chat.tool_choice = choice;
    if (typeof req.parallel_tool_calls === 'boolean') chat.parallel_tool_calls = req.parallel_tool_calls;
  }
  const format = responseFormat(req.text?.format);
  if (format) chat.response_format = format;
  const effort = req.reasoning?.effort;
  if (typeof effort === 'string') {
    if (o.effortLevels.includes(effort)) chat.reasoning_effort = effort;
    else dropped?.push(`reasoning.effort ${effort} (the engine takes ${o.effortLevels.join(', ') || 'none'})`);
  }
  if (req.stream === true) {
    chat.stream = true;
    if (o.streamUsage) chat.stream_options = { include_usage: true };
  }
  return chat;
}

/** The request's input as items (a string is one user message). */
export function inputItems(req: ResponsesRequest): InputItem[] {
  const input = req.input;
  if (input === undefined) return [];
  return typeof input === 'string' ? [{ type: 'message', role: 'user', content: input }] : input;
}

/** Estimated prompt tokens (characters / 4) of the instructions, the items' text and the tools. */
export function estimateInputTokens(req: ResponsesRequest, items: readonly InputItem[]): number {
  let chars = typeof req.instructions === 'string' ? req.instructions.length : 0;
  for (const item of items) {
    const i = item as { content?: unknown; arguments?: unknown; output?: unknown; name?: unknown };
    for (const v of [i.content, i.arguments, i.output, i.name]) {
      if (typeof v === 'string') chars += v.length;
      else if (Array.isArray(v)) for (const p of v) if (isObject(p) && typeof p.text === 'string') chars += p.text.length;
    }
  }
  if (req.tools?.length) chars += JSON.stringify(req.tools).length;
  return Math.floor(chars / 4);
}
