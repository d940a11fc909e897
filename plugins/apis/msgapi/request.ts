// Messages request → chat-completions request. The request has passed translationProblem
// (check.ts); what chat-completions cannot carry — unknown fields, block types it has no form for
// — is dropped, and named in `dropped` when the caller collects them (a debug log).
import { isBillingBlock } from './billing.js';
import type { Block, ImageBlock, MessagesRequest, TextBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock } from './types.js';

export interface ChatOptions {
  /** The model name to send (an alias already resolved for the chosen endpoint). */
  model: string;
  /** The backend takes top_k in chat requests. */
  topK: boolean;
  /** The backend can report usage at the end of a stream (stream_options.include_usage). */
  streamUsage: boolean;
  /** The `reasoning_effort` levels a thinking budget may be sent as (profile request.reasoning_effort,
   *  when translators.msgapi.thinking_effort is on). */
  effortLevels?: readonly string[];
  /** Earlier thinking may go back as `reasoning_content` (local engines; hosted services such as
   *  DeepSeek's refuse it). */
  reasoningHistory?: boolean;
  /** Leave out Claude Code's per-request billing block of `system` (billing.ts). */
  dropBillingHeader?: boolean;
  /** Collects what was dropped ("field thinking", "block document"), when given. */
  dropped?: string[];
}

type ChatPart = { type: 'text'; text: string } | { type: 'image_url'; image_url: { url: string } };
type ChatMessage = Record<string, unknown>;
type Turn = { role: 'user' | 'assistant'; content: Block[] };

/** The request fields the translator reads; any other is dropped. */
const KNOWN_FIELDS = new Set([
  'model',
  'messages',
  'max_tokens',
  'system',
  'temperature',
  'top_p',
  'top_k',
  'stop_sequences',
  'stream',
  'tools',
  'tool_choice',
  'metadata',
  'thinking',
]);

const textOf = (content: string | Block[] | undefined): string =>
  typeof content === 'string'
    ? content
    : (content ?? [])
        .filter((b): b is TextBlock => b.type === 'text')
        .map((b) => b.text)
        .join('\n');

const blocksOf = (content: string | Block[]): Block[] => (typeof content === 'string' ? [{ type: 'text', text: content }] : content);

function imageUrl(block: ImageBlock): string {
  const s = block.source;
  return s.type === 'url' ? s.url : `data:${s.media_type};base64,${s.data}`;
}

function toolResultContent(block: ToolResultBlock): string {
  const text = textOf(block.content);
  return block.is_error ? `Error: ${text}` : text;
}

/**
 * The turns as chat messages will carry them, with two rules for strict chat templates:
 *
 * - A `system` message in the middle of `messages` (Claude Code sends them) stays where it is, as
 *   user-role text wrapped in <system-reminder> tags. Hoisting it to the top would change the
 *   prompt prefix (the engine's prompt cache is lost) and templates such as Qwen3's reject a
 *   system message that is not first.
 * - Consecutive turns of one role are merged into one turn, as the messages API itself does.
 *   Templates with strict alternation (Mistral, Llama 2) raise on two user turns in a row; with
 *   this rule the reminder joins the user turn before it and the one after it, and stands as a
 *   user turn of its own only between two assistant turns (or next to one at an end).
 */
function turnsOf(messages: MessagesRequest['messages'], dropped: string[] | undefined): Turn[] {
  const turns: Turn[] = [];
  for (const m of messages) {
    let role: Turn['role'];
    let blocks: Block[];
    if (m.role === 'system') {
      const text = textOf(m.content);
      if (!text) {
        dropped?.push('an empty system message');
        continue;
      }
      role = 'user';
      blocks = [{ type: 'text', text: `<system-reminder>\n${text}\n</system-reminder>` }];
    } else {
      role = m.role;
      blocks = blocksOf(m.content);
    }
    const last = turns.at(-1);
    if (last?.role === role) last.content = [...last.content, ...blocks];
    else turns.push({ role, content: blocks });
  }
  return turns;
}

/** One turn → chat messages (a user turn's tool results become role `tool` messages, first). */
function convertTurn({ role, content }: Turn, reasoningHistory: boolean, dropped: string[] | undefined): ChatMessage[] {
  if (role === 'assistant') {
    let text = '';
    let thinking = '';
    const calls: unknown[] = [];
    for (const b of content) {
      if (b.type === 'text') text += (b as TextBlock).text;
      else if (b.type === 'thinking') thinking += (b as ThinkingBlock).thinking ?? '';
      else if (b.type === 'tool_use') {
        const u = b as ToolUseBlock;
        calls.push({ id: u.id, type: 'function', function: { name: u.name, arguments: JSON.stringify(u.input ?? {}) } });
      } else dropped?.push(`assistant block ${b.type}`);
    }
    // Earlier thinking goes back as reasoning_content, the field engines' chat templates read
    // (Qwen3's, DeepSeek's); the signature means nothing to them.
    if (thinking && !reasoningHistory) dropped?.push('assistant block thinking (the engine is a hosted service)');
    const reasoning = thinking && reasoningHistory ? { reasoning_content: thinking } : {};
    return [{ role: 'assistant', content: text || (calls.length ? null : ''), ...reasoning, ...(calls.length ? { tool_calls: calls } : {}) }];
  }
  const out: ChatMessage[] = [];
  const parts: ChatPart[] = [];
  for (const b of content) {
    if (b.type === 'tool_result')
      out.push({ role: 'tool', tool_call_id: (b as ToolResultBlock).tool_use_id, content: toolResultContent(b as ToolResultBlock) });
    else if (b.type === 'text') parts.push({ type: 'text', text: (b as TextBlock).text });
    else if (b.type === 'image') parts.push({ type: 'image_url', image_url: { url: imageUrl(b as ImageBlock) } });
    else dropped?.push(`user block ${b.type}`);
  }
  if (parts.length)
    out.push({ role: 'user', content: parts.every((p) => p.type === 'text') ? parts.map((p) => (p as { text: string }).text).join('\n') : parts });
  return out;
}

const TOOL_CHOICES = new Map([
  ['auto', 'auto'],
  ['any', 'required'],
  ['none', 'none'],
]);

function toolChoice(choice: MessagesRequest['tool_choice']): unknown {
  const c = typeof choice === 'string' ? { type: choice } : choice;
  if (!c) return undefined;
  if (c.type === 'tool') return { type: 'function', function: { name: (c as { name: string }).name } };
  return TOOL_CHOICES.get(c.type);
}

/** A thinking budget as a reasoning effort: under 4k tokens low, under 16k medium, else high;
 *  thinking disabled is `none` (sent only to engines that take it). */
function effortOf(thinking: MessagesRequest['thinking']): string | undefined {
  if (thinking?.type === 'disabled') return 'none';
  if (thinking?.type !== 'enabled' || typeof thinking.budget_tokens !== 'number') return undefined;
  return thinking.budget_tokens < 4096 ? 'low' : thinking.budget_tokens < 16384 ? 'medium' : 'high';
}

function systemText(system: MessagesRequest['system'], dropBilling: boolean): string {
  if (!dropBilling || typeof system === 'string' || !system?.some(isBillingBlock)) return textOf(system);
  return textOf(system.filter((b) => !isBillingBlock(b)));
}

export function toChatRequest(req: MessagesRequest, o: ChatOptions): Record<string, unknown> {
  const { dropped } = o;
  if (dropped) for (const key of Object.keys(req)) if (!KNOWN_FIELDS.has(key)) dropped.push(`field ${key}`);
  const messages: ChatMessage[] = [];
  const system = systemText(req.system, o.dropBillingHeader === true);
  if (system) messages.push({ role: 'system', content: system });
  for (const turn of turnsOf(req.messages, dropped)) messages.push(...convertTurn(turn, o.reasoningHistory !== false, dropped));
  const chat: Record<string, unknown> = { model: o.model, messages };
  if (req.max_tokens !== undefined) chat.max_tokens = req.max_tokens;
  if (req.temperature !== undefined) chat.temperature = req.temperature;
  if (req.top_p !== undefined) chat.top_p = req.top_p;
  if (req.top_k !== undefined && o.topK) chat.top_k = req.top_k;
  if (req.stop_sequences?.length) chat.stop = req.stop_sequences;
  if (req.tools?.length) {
    chat.tools = req.tools.map((t) => ({
      type: 'function',
      function: { name: t.name, ...(t.description ? { description: t.description } : {}), parameters: t.input_schema ?? { type: 'object', properties: {} } },
    }));
  }
  const choice = toolChoice(req.tool_choice);
  if (choice !== undefined && req.tools?.length) chat.tool_choice = choice;
  if (req.metadata?.user_id) chat.user = req.metadata.user_id;
  const effort = effortOf(req.thinking);
  if (effort && o.effortLevels?.includes(effort)) chat.reasoning_effort = effort;
  else if (effort) dropped?.push(`thinking as reasoning_effort ${effort} (the engine takes ${o.effortLevels?.join(', ') || 'none'})`);
  if (req.stream === true) {
    chat.stream = true;
    if (o.streamUsage) chat.stream_options = { include_usage: true };
  }
  return chat;
}
