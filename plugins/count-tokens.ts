// POST /gw/msgapi/v1/messages/count_tokens. Where a candidate endpoint counts tokens itself
// (api.msgapi_support.token_count: the cppengine family) and passthrough is on, the request is
// forwarded to its <messages_path>/count_tokens like a messages passthrough — alias rewrite,
// failover, upstream headers, the billing block dropped toward local backends, errors put in the
// messages API's shape — and its count comes back in the spec's shape (llama.cpp sends only
// input_tokens: output_tokens 0 and total_tokens are added). Otherwise the spec's estimate
// (characters / 4), which needs no backend: no candidate counts, none can take the request now
// (unroutable, breaker open, all failed), or the backend answers 404 or 501 for that path (a
// build without it). X-Gw-Token-Count says which: `backend` or `estimate`.
import { definePlugin, gwError, retrySettings, sendUpstream, withModel, type Candidate, type Context, type ReplyPlan, type SendPolicy } from '../engine/api.js';
import { INFERENCE_API } from './apis/inference-api.js';
import { rewritePlan, type Rewritten } from './replies/rewrite-body.js';
import { translationProblem } from './apis/msgapi/check.js';
import { estimateInputTokens } from './apis/msgapi/estimate.js';
import { countsTokens } from './apis/msgapi/mode.js';
import { passthroughBody, passthroughReply } from './apis/msgapi/passthrough.js';

interface Options {
  passthrough?: boolean;
}
type Source = 'backend' | 'estimate';
const SOURCE = 'count-tokens.source';
const JSON_TYPE = ['content-type', 'application/json'];
const PIPE: ReplyPlan = { kind: 'pipe' };

/** The estimate's reply; a request it cannot read gets 400 naming the field. */
function estimate(ctx: Context): string {
  const body = ctx.bodyJson();
  const why = translationProblem(body, false);
  if (why) throw gwError('BAD_REQUEST', { reason: why });
  const input = estimateInputTokens(body);
  ctx.state[SOURCE] = 'estimate' satisfies Source;
  return JSON.stringify({ input_tokens: input, output_tokens: 0, total_tokens: input });
}

/** A backend's count in the spec's shape: output_tokens (0) and total_tokens added when missing;
 *  a reply that is not a count goes as it came. */
const inSpecShape = (_status: number, body: Buffer): Rewritten => {
  let reply: Record<string, unknown>;
  try {
    reply = JSON.parse(body.toString('utf8'));
  } catch {
    return null;
  }
  if (typeof reply !== 'object' || reply === null || typeof reply.input_tokens !== 'number') return null;
  if (reply.output_tokens !== undefined && reply.total_tokens !== undefined) return null;
  const output = typeof reply.output_tokens === 'number' ? reply.output_tokens : 0;
  return { body: JSON.stringify({ ...reply, output_tokens: reply.output_tokens ?? 0, total_tokens: reply.total_tokens ?? reply.input_tokens + output }) };
};

export default definePlugin<Options>({
  name: 'count-tokens',
  needs: ['messages-request'],
  uses: ['candidates'],
  terminal: true,
  schema: {
    type: 'object',
    additionalProperties: false,
    properties: {
      passthrough: {
        type: 'boolean',
        description: 'Forward to endpoints that count tokens themselves (false: always the estimate). Default: translators.msgapi.passthrough',
      },
    },
  },
  apply(hooks, o, env) {
    const msgapi = env.config.translators.msgapi;
    const forward = o.passthrough ?? msgapi.passthrough;
    const stripBilling = msgapi.strip_billing_header;
    /** The backend has no such path after all: its body is dropped, the estimate answers. */
    const estimateInstead = (ctx: Context): ReplyPlan => ({
      kind: 'buffer',
      discard: true,
      finish: () => ({ status: 200, headers: JSON_TYPE, body: estimate(ctx) }),
    });

    const policy: SendPolicy<Context> = {
      maxRetries: env.config.proxy.max_retries,
      retry: retrySettings(env),
      // A context-length error goes to a fallback with a larger window, as on the messages route.
      api: INFERENCE_API,
      // No model runs: sending it twice costs nothing.
      replaySafe: () => true,
      // Counting runs no model: it never waits behind a generation for a slot.
      queued: () => false,
      request: (ctx, ep, model) => ({
        method: 'POST',
        path: ep.upstreamPath(`${ep.profile.api.msgapi_support!.messages_path}/count_tokens`),
        headers: [],
        body: withModel(passthroughBody(ctx, ep, stripBilling), model, ctx),
      }),
      reply: (ctx, status, headers) => {
        if (status === 404 || status === 501) return estimateInstead(ctx);
        if (status < 400) ctx.state[SOURCE] = 'backend' satisfies Source;
        if (status >= 200 && status < 300) return rewritePlan(headers, inSpecShape);
        return status < 400 ? PIPE : passthroughReply(status, headers);
      },
      // No endpoint could take it (none counts, none routable, every breaker open, every one
      // failed before answering): the estimate, which needs none.
      unavailable: (ctx) => ctx.reply(200, estimate(ctx), JSON_TYPE),
    };

    /** The candidates that count; none when passthrough is off. Routing steps before this one
     *  (alias-resolve, select-endpoint) make the plan; without them there are none. */
    const counting = (c: Candidate) => forward && countsTokens(c.endpoint);
    hooks.dispatch.tapPromise('count-tokens', (ctx) => sendUpstream(ctx, policy, counting));

    hooks.respond.tap('count-tokens', (ctx) => {
      const source = ctx.state[SOURCE] as Source | undefined;
      if (source) ctx.replyHeaders.push('x-gw-token-count', source);
      if (source !== 'estimate' && ctx.endpoint) ctx.replyHeaders.push('x-gw-mode', 'passthrough');
    });
  },
});
