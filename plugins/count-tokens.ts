// POST /gw/msgapi/v1/messages/count_tokens. Where a candidate endpoint counts tokens itself
// (api.msgapi_support.token_count: the cppengine family), the request is forwarded to its
// <messages_path>/count_tokens like a messages passthrough — alias rewrite, failover, upstream
// headers, the billing block dropped toward local backends, errors put in the messages API's
// shape — and its reply comes back as it gave it. Otherwise the spec's estimate (characters / 4):
// no candidate counts, or the backend answers 404 or 501 for that path (a build without it).
// X-Gw-Token-Count says which: `backend` or `estimate`.
import type { Context } from '../engine/kernel/context.js';
import { gwError } from '../engine/kernel/errors.js';
import { definePlugin } from '../engine/kernel/plugin.js';
import { sendUpstream, type ReplyPlan, type SendPolicy } from '../engine/kernel/upstream.js';
import { translationProblem } from './lib/msgapi/check.js';
import { estimateInputTokens } from './lib/msgapi/estimate.js';
import { countsTokens } from './lib/msgapi/mode.js';
import { passthroughBody, passthroughReply } from './lib/msgapi/passthrough.js';

type Source = 'backend' | 'estimate';
const SOURCE = 'count-tokens.source';
const JSON_TYPE = ['content-type', 'application/json'];

/** The estimate's reply; a request it cannot read gets 400 naming the field. */
function estimate(ctx: Context): string {
  const body = ctx.bodyJson();
  const why = translationProblem(body, false);
  if (why) throw gwError('BAD_REQUEST', { reason: why });
  const input = estimateInputTokens(body);
  ctx.state[SOURCE] = 'estimate' satisfies Source;
  return JSON.stringify({ input_tokens: input, output_tokens: 0, total_tokens: input });
}

export default definePlugin<Record<string, never>>({
  name: 'count-tokens',
  needs: ['messages-request'],
  uses: ['candidates'],
  terminal: true,
  schema: { type: 'object', additionalProperties: false },
  apply(hooks, _o, env) {
    const stripBilling = env.config.translators.msgapi.strip_billing_header;
    /** The backend has no such path after all: answered with the estimate instead. */
    const estimateInstead = (ctx: Context): ReplyPlan => ({
      kind: 'buffer', limit: 64 * 1024,
      finish: () => ({ status: 200, headers: JSON_TYPE, body: estimate(ctx) }),
    });

    const policy: SendPolicy = {
      maxRetries: env.config.proxy.max_retries,
      // No model runs: sending it twice costs nothing.
      replaySafe: () => true,
      request: (ctx, ep) => ({
        method: 'POST', path: ep.upstreamPath(`${ep.profile.api.msgapi_support!.messages_path}/count_tokens`), headers: [], body: passthroughBody(ctx, ep, stripBilling),
      }),
      reply: (ctx, status, headers) => {
        if (status === 404 || status === 501) return estimateInstead(ctx);
        if (status < 400) ctx.state[SOURCE] = 'backend' satisfies Source;
        return passthroughReply(status, headers);
      },
    };

    hooks.dispatch.tapPromise('count-tokens', async (ctx) => {
      // Routing steps before this one (alias-resolve, select-endpoint) choose the candidates;
      // without them there are none, and the estimate answers.
      const counting = ctx.candidates.every(countsTokens) ? ctx.candidates : ctx.candidates.filter(countsTokens);
      if (counting.length) return sendUpstream(ctx, policy, counting);
      return ctx.reply(200, estimate(ctx), JSON_TYPE);
    });

    hooks.respond.tap('count-tokens', (ctx) => {
      const source = ctx.state[SOURCE] as Source | undefined;
      if (source) ctx.replyHeaders.push('x-gw-token-count', source);
      if (source !== 'estimate' && ctx.endpoint) ctx.replyHeaders.push('x-gw-mode', 'passthrough');
    });
  },
});
