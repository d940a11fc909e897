// Passthrough to a backend that speaks the messages API (messages and count_tokens): the request
// goes as it came — less Claude Code's per-request billing block toward local backends — and the
// reply comes back as the backend sent it, except an error body that is not in the messages
// API's error shape, which is wrapped so the client can read it (status kept, message inside).
import type { Endpoint } from '../../../engine/backends/endpoints.js';
import type { Context } from '../../../engine/kernel/context.js';
import type { ReplyPlan } from '../../../engine/kernel/upstream.js';
import { isLocalFamily, withoutBillingHeader } from './billing.js';
import { errorReply, isMessagesError } from './response.js';

const STRIPPED = 'msgapi.passthroughBody';

/** The body for this endpoint: the original bytes, or (local family, stripping on, a billing
 *  block present) the JSON without that block, serialised once per request. */
export function passthroughBody(ctx: Context, ep: Endpoint, stripBilling: boolean): Buffer | null {
  if (!stripBilling || !isLocalFamily(ep.profile)) return ctx.body;
  let stripped = ctx.state[STRIPPED] as Buffer | null | undefined;
  if (stripped === undefined) {
    const body = withoutBillingHeader(ctx.bodyJson());
    stripped = ctx.state[STRIPPED] = body ? Buffer.from(JSON.stringify(body)) : null;
  }
  return stripped ?? ctx.body;
}

/** Error bodies are small; one larger than this ends as 502 rather than being held. */
const ERROR_BODY_LIMIT = 64 * 1024;
const PIPE: ReplyPlan = { kind: 'pipe' };
/** Backend headers not carried onto a rewritten error body. */
const NOT_KEPT = new Set(['content-length', 'content-type', 'transfer-encoding', 'connection', 'keep-alive', 'te', 'trailer', 'upgrade', 'proxy-authenticate', 'proxy-authorization']);

function keptHeaders(headers: Record<string, string | string[] | undefined>): string[] {
  const out: string[] = [];
  for (const name in headers) {
    const value = headers[name];
    if (value === undefined || NOT_KEPT.has(name)) continue;
    if (typeof value === 'string') out.push(name, value);
    else for (const v of value) out.push(name, v);
  }
  return out;
}

/** Success replies are piped; an error (status >= 400) is read whole (bounded) and passed on
 *  unchanged when it already has the messages API's error shape, else wrapped into it. A
 *  compressed error body cannot be read here and goes as it came. */
export function passthroughReply(status: number, headers: Record<string, string | string[] | undefined>): ReplyPlan {
  if (status < 400) return PIPE;
  const encoding = headers['content-encoding'];
  if (encoding !== undefined && encoding !== 'identity') return PIPE;
  return {
    kind: 'buffer', limit: ERROR_BODY_LIMIT,
    finish(status, body) {
      const text = body.toString('utf8');
      const kept = keptHeaders(headers);
      if (isMessagesError(text)) return { status, headers: [...kept, 'content-type', String(headers['content-type'] ?? 'application/json')], body: text };
      return { status, headers: [...kept, 'content-type', 'application/json'], body: JSON.stringify(errorReply(status, text)) };
    },
  };
}
