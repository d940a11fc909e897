// The terminal step of POST /gw/msgapi/v1/messages. Per candidate endpoint: passthrough when its
// profile declares native messages-API support (api.msgapi_support, respecting min_version when
// the endpoint's version is configured) — the original bytes go to its messages_path (less the
// billing block toward local backends) and the reply comes back unchanged but for errors put in
// the messages API's shape, with X-Gw-Mode: passthrough; otherwise translation to
// chat-completions at its chat path, without the messages API's own headers, and the reply
// translated back. Routing, aliases, balancing, failover and gateway headers are those of the
// proxy routes.
import type { Endpoint } from '../engine/backends/endpoints.js';
import type { Context, UpstreamRequest } from '../engine/kernel/context.js';
import { GatewayError, gwError } from '../engine/core/errors.js';
import { definePlugin } from '../engine/kernel/plugin.js';
import { retrySettings, sendUpstream, type SendPolicy } from '../engine/kernel/upstream.js';
import { ClientGone } from '../engine/backends/failures.js';
import { isLocalFamily } from './lib/msgapi/billing.js';
import { translationProblem } from './lib/msgapi/check.js';
import { estimateInputTokens } from './lib/msgapi/estimate.js';
import { isMessagesApiHeader } from './lib/msgapi/headers.js';
import { modeFor, type Fallback, type Mode } from './lib/msgapi/mode.js';
import { passthroughBody, passthroughReply } from './lib/msgapi/passthrough.js';
import { translatedReply, type TranslateOptions } from './lib/msgapi/reply-plan.js';
import { toChatRequest } from './lib/msgapi/request.js';
import { INFERENCE_API } from './lib/inference-api.js';
import { continuationApi, continuationKind, continued, type AnswerText } from './lib/continuation/index.js';
import type { MessagesRequest } from './lib/msgapi/types.js';

interface Options { passthrough?: boolean; max_retries?: number; name: string }
interface MsgapiState { mode?: Mode; fallback?: Fallback; stream?: boolean; malformed?: number; translation?: TranslateOptions }

export default definePlugin<Options>({
  name: 'translate',
  needs: ['messages-request', 'candidates'],
  uses: ['aliases'],
  terminal: true,
  schema: {
    type: 'object', additionalProperties: false,
    properties: {
      passthrough: { type: 'boolean', description: 'Forward natively to backends that support the messages API (false: always translate). Default: translators.msgapi.passthrough' },
      max_retries: { type: 'integer', minimum: 0, description: 'Default: proxy.max_retries' },
      name: { type: 'string', default: 'msgapi', description: 'Translator name in /internal/stats/translators' },
    },
  },
  apply(hooks, o, env) {
    const maxRetries = o.max_retries ?? env.config.proxy.max_retries;
    const stripBilling = env.config.translators.msgapi.strip_billing_header;
    const passthrough = o.passthrough ?? env.config.translators.msgapi.passthrough;
    const counters = env.stats.translator(o.name);
    const state = (ctx: { state: Record<string, unknown> }) => ((ctx.state.msgapi ??= {}) as MsgapiState);

    /** The first translated attempt checks what translation reads (400 naming the field) and
     *  fixes what the reply translation needs; later attempts reuse it. */
    const translationOf = (ctx: Context, st: MsgapiState, req: MessagesRequest): TranslateOptions => {
      if (st.translation) return st.translation;
      const why = translationProblem(req);
      if (why) throw gwError('BAD_REQUEST', { reason: why });
      return (st.translation = {
        stream: st.stream === true, model: req.model, inputTokens: estimateInputTokens(req), stopSequences: req.stop_sequences,
        onMalformed: (n) => (st.malformed = (st.malformed ?? 0) + n),
        onUsage: (usage) => (ctx.usage = usage),
      });
    };

    /** The chat-completions request for one endpoint; what it drops is logged once, at debug. */
    const chatRequest = (ctx: Context, ep: Endpoint, model: string | undefined, st: MsgapiState): UpstreamRequest => {
      const req = ctx.bodyJson() as MessagesRequest;
      const first = !st.translation;
      translationOf(ctx, st, req);
      const log = ctx.route.log;
      const dropped = first && log.isLevelEnabled('debug') ? [] as string[] : undefined;
      const chat = toChatRequest(req, {
        model: model ?? req.model, topK: ep.profile.request.supports_top_k, streamUsage: ep.profile.request.stream_usage,
        dropBillingHeader: stripBilling && isLocalFamily(ep.profile), dropped,
      });
      if (dropped?.length) log.debug({ req: ctx.id, endpoint: ep.name, dropped }, 'translation to chat-completions dropped what it cannot carry');
      return { method: 'POST', path: ep.upstreamPath(chatPath(ep)), headers: [], body: Buffer.from(JSON.stringify(chat)), omitClientHeader: isMessagesApiHeader };
    };
    const chatPath = (ep: Endpoint) => ep.profile.request.parsing_rules?.chat_completions_path ?? '/v1/chat/completions';
    /** The path an endpoint is sent this request at: its messages path, or its chat path. */
    const upstreamRoute = (ep: Endpoint) => (modeFor(ep, passthrough).mode === 'passthrough' ? ep.profile.api.msgapi_support!.messages_path : chatPath(ep));

    const policy: SendPolicy<Context> = {
      maxRetries,
      retry: retrySettings(env),
      api: INFERENCE_API,
      // The messages API is inference: replay-safe on every endpoint.
      replaySafe: () => true,
      streaming: (ctx) => state(ctx).stream === true,
      request: (ctx, ep, model) => {
        const st = state(ctx);
        const { mode, fallback } = modeFor(ep, passthrough);
        st.mode = mode;
        st.fallback = fallback;
        if (mode === 'translation') return chatRequest(ctx, ep, model, st);
        return { method: 'POST', path: ep.upstreamPath(ep.profile.api.msgapi_support!.messages_path), headers: [], body: passthroughBody(ctx, ep, stripBilling) };
      },
      reply: (ctx, status, headers) => {
        const st = state(ctx);
        return st.mode === 'passthrough' ? passthroughReply(status, headers) : translatedReply(st.translation!, status, headers);
      },
      // A broken stream is continued in the API the endpoint is spoken to in: the messages
      // API's prefill (passthrough), or a chat continuation whose events the translation reads
      // on, as if they were the broken stream's.
      continuation: (_ctx, ep) => continuationApi(continuationKind(ep.profile, upstreamRoute(ep))),
      continueRequest: (ctx, ep, model, answer) => {
        const kind = continuationKind(ep.profile, upstreamRoute(ep))!;
        const up = policy.request(ctx, ep, model);
        const c = continued(kind, JSON.parse(up.body!.toString('utf8')), answer as AnswerText, ep.profile);
        if (typeof c === 'string') return c;
        return { ...up, body: Buffer.from(JSON.stringify(c.body)) };
      },
    };

    hooks.dispatch.tapPromise('translate', async (ctx) => {
      state(ctx).stream = (ctx.bodyJson() as { stream?: unknown }).stream === true;
      return sendUpstream(ctx, policy);
    });

    hooks.respond.tap('translate', (ctx) => {
      if (state(ctx).mode === 'passthrough') ctx.replyHeaders.push('x-gw-mode', 'passthrough');
    });

    hooks.done.tap('translate', (ctx) => {
      const st = state(ctx);
      counters.total++;
      counters.totalLatencyMs += ctx.totalMs;
      if (st.stream) counters.streaming++;
      else counters.nonStreaming++;
      if (st.mode === 'passthrough') counters.passthrough++;
      else if (st.mode === 'translation') counters.translation++;
      if (st.fallback === 'cannot') counters.fallbackCannotPassthrough++;
      if (st.fallback === 'translator') counters.fallbackTranslatorDoesNotSupportPassthrough++;
      counters.malformedChunks += st.malformed ?? 0;
      const err = ctx.error;
      if (err instanceof GatewayError && ['ENDPOINT_UNAVAILABLE', 'MODEL_NOT_FOUND', 'MODEL_UNAVAILABLE', 'CIRCUIT_BREAKER'].includes(err.key)) counters.fallbackNoCompatibleEndpoints++;
      if (ctx.status > 0 && ctx.status < 400 && !(err && !(err instanceof ClientGone))) counters.succeeded++;
      else counters.failed++;
    });
  },
});
