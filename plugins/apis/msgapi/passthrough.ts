// Passthrough to a backend that speaks the messages API (messages and count_tokens): the request
// goes as it came — less Claude Code's per-request billing block toward local backends — and the
// reply comes back as the backend sent it, except an error body that is not in the messages
// API's error shape, which is wrapped so the client can read it (status kept, message inside).
import type { Context, Endpoint, ReplyHeaders, ReplyPlan } from '../../../engine/api.js';
import { rewritePlan, type Rewritten } from '../../replies/rewrite-body.js';
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

const PIPE: ReplyPlan = { kind: 'pipe' };

/** An error body already in the messages API's error shape goes as it came; any other is
 *  wrapped into it, its message inside. */
const inMessagesShape = (status: number, body: Buffer): Rewritten => {
  const text = body.toString('utf8');
  return isMessagesError(text) ? null : { body: JSON.stringify(errorReply(status, text)), contentType: 'application/json' };
};

/** Success replies are piped; an error (status >= 400) is put in the messages API's shape —
 *  unless it cannot be read here (compressed, over the rewrite limit): then it goes as it came. */
export function passthroughReply(status: number, headers: ReplyHeaders): ReplyPlan {
  return status < 400 ? PIPE : rewritePlan(headers, inMessagesShape);
}
