// Chat-completions reply → Responses reply, and the pieces the stream translator shares: the
// response object around the output (what the request set, echoed), the status a finish reason
// gives, the usage.
import type { Usage } from '../chat-stream.js';
import { reasoningOf } from '../chat-stream.js';
import { newId } from '../new-id.js';
import type { OutputItem, ResponsesRequest, ResponseUsage } from './types.js';
import { reasoningToken } from './request.js';

/** Reasoning as `summary` parts when the request asks for a summary (the only reasoning the
 *  Vercel AI SDK and Codex's default view show; an engine's reasoning is given whole, there is no
 *  summariser), else as `reasoning_text` content; with `encrypted_content` when the request
 *  includes it (Codex sends that back on later turns, not the text). */
export interface ReasoningStyle {
  summary: boolean;
  encrypted: boolean;
}

/** What every response object of one request carries; what only some replies need (the prompt
 *  estimate, the request's settings echoed) is worked out when first asked. */
export class Shell {
  readonly id = newId('resp_');
  readonly created_at = Math.floor(Date.now() / 1000);
  readonly model: string;
  readonly reasoning: ReasoningStyle;
  private input: number | undefined;
  private echo: string | undefined;

  constructor(
    private readonly req: ResponsesRequest,
    private readonly estimate: () => number,
    readonly stored: boolean,
  ) {
    this.model = req.model;
    const r = req.reasoning;
    this.reasoning = {
      summary: typeof r?.summary === 'string' && r.summary !== 'none',
      encrypted: Array.isArray(req.include) && req.include.includes('reasoning.encrypted_content'),
    };
  }

  /** Estimated prompt tokens (characters / 4), for a backend that reports none. */
  get inputTokens(): number {
    return (this.input ??= this.estimate());
  }

  /** The request's settings as the response object echoes them, serialised without braces
   *  (built as a string: only what the request set is serialised). */
  get echoJson(): string {
    if (this.echo !== undefined) return this.echo;
    const req = this.req;
    const r = req.reasoning;
    const format = req.text?.format;
    return (this.echo =
      `"instructions":${str(req.instructions)},"max_output_tokens":${num(req.max_output_tokens)},"parallel_tool_calls":${req.parallel_tool_calls === false ? 'false' : 'true'},` +
      `"previous_response_id":${str(req.previous_response_id)},"reasoning":{"effort":${str(r?.effort)},"summary":${str(r?.summary)}},"store":${this.stored},` +
      `"temperature":${num(req.temperature)},"text":{"format":${format ? JSON.stringify(format) : '{"type":"text"}'}},"tool_choice":${req.tool_choice === undefined ? '"auto"' : JSON.stringify(req.tool_choice)},` +
      `"tools":${req.tools?.length ? JSON.stringify(req.tools) : '[]'},"top_p":${num(req.top_p)},"truncation":"disabled","metadata":${req.metadata ? JSON.stringify(req.metadata) : '{}'}`);
  }
}

const str = (v: unknown): string => (typeof v === 'string' ? JSON.stringify(v) : 'null');
const num = (v: unknown): string => (typeof v === 'number' && Number.isFinite(v) ? String(v) : 'null');

export function shellOf(req: ResponsesRequest, estimate: () => number, stored: boolean): Shell {
  return new Shell(req, estimate, stored);
}

export type Status = 'in_progress' | 'completed' | 'incomplete' | 'failed';

/** A finish reason's status: `length` and `content_filter` leave the response incomplete. */
export function statusOf(finish: string | null | undefined): { status: 'completed' | 'incomplete'; incomplete_details: { reason: string } | null } {
  if (finish === 'length') return { status: 'incomplete', incomplete_details: { reason: 'max_output_tokens' } };
  if (finish === 'content_filter') return { status: 'incomplete', incomplete_details: { reason: 'content_filter' } };
  return { status: 'completed', incomplete_details: null };
}

/** The backend's counts where it reported them, else estimates (characters / 4). */
export function usageOf(reported: Usage | null | undefined, shell: Shell, outputChars: number): ResponseUsage {
  const input = reported?.input ?? shell.inputTokens;
  const output = reported?.output ?? Math.floor(outputChars / 4);
  return {
    input_tokens: input,
    input_tokens_details: { cached_tokens: reported?.cached ?? 0 },
    output_tokens: output,
    output_tokens_details: { reasoning_tokens: reported?.reasoning ?? 0 },
    total_tokens: input + output,
  };
}

/** A response object as JSON, its output already serialised: the request's echo is serialised
 *  once per request (Shell.echoJson), not once per frame. */
export function responseJson(
  shell: Shell,
  status: Status,
  outputJson: string,
  usage: ResponseUsage | null,
  more: { incomplete_details?: unknown; error?: unknown } = {},
): string {
  return `{"id":"${shell.id}","object":"response","created_at":${shell.created_at},"status":"${status}","error":${JSON.stringify(more.error ?? null)},"incomplete_details":${JSON.stringify(more.incomplete_details ?? null)},"model":${JSON.stringify(shell.model)},"output":${outputJson},"usage":${usage ? JSON.stringify(usage) : 'null'},${shell.echoJson}}`;
}

interface ChatReply {
  choices?: Array<{
    message?: {
      content?: string | null;
      reasoning_content?: unknown;
      reasoning?: unknown;
      tool_calls?: Array<{ id?: string; function?: { name?: string; arguments?: unknown } }>;
    };
    finish_reason?: string | null;
  }>;
}

export function messageItem(text: string, status: 'completed' | 'incomplete', id = newId('msg_')): OutputItem {
  return { type: 'message', id, status, role: 'assistant', content: [{ type: 'output_text', text, annotations: [], logprobs: [] }] };
}

export function reasoningItem(text: string, style: ReasoningStyle, id = newId('rs_')): OutputItem {
  const item: OutputItem = style.summary
    ? { type: 'reasoning', id, summary: [{ type: 'summary_text', text }] }
    : { type: 'reasoning', id, summary: [], content: [{ type: 'reasoning_text', text }] };
  if (style.encrypted) item.encrypted_content = reasoningToken(text);
  return item;
}

/** A whole chat-completions reply as a response object (serialised) and its output items;
 *  `reported` is the backend's usage. */
export function toResponse(reply: ChatReply, shell: Shell, reported: Usage | null): { json: string; output: OutputItem[] } {
  const choice = reply?.choices?.[0] ?? {};
  const msg = choice.message ?? {};
  const { status, incomplete_details } = statusOf(choice.finish_reason);
  const output: OutputItem[] = [];
  const reasoning = reasoningOf(msg);
  if (reasoning) output.push(reasoningItem(reasoning, shell.reasoning));
  const text = typeof msg.content === 'string' ? msg.content : '';
  if (text) output.push(messageItem(text, status));
  let outputChars = reasoning.length + text.length;
  for (const call of msg.tool_calls ?? []) {
    if (!call || typeof call !== 'object') continue;
    const args = typeof call.function?.arguments === 'string' ? call.function.arguments : JSON.stringify(call.function?.arguments ?? {});
    outputChars += args.length;
    output.push({
      type: 'function_call',
      id: newId('fc_'),
      call_id: call.id || newId('call_'),
      name: call.function?.name ?? '',
      arguments: args,
      status: status === 'completed' ? 'completed' : 'incomplete',
    });
  }
  return { json: responseJson(shell, status, JSON.stringify(output), usageOf(reported, shell, outputChars), { incomplete_details }), output };
}
