// The terminal step of POST /gw/msgapi/v1/messages. Per candidate endpoint: passthrough when its
// profile declares native messages-API support (api.msgapi_support, respecting min_version when
// the endpoint's version is configured) — the original bytes go to its messages_path and the
// reply comes back unchanged, with X-Gw-Mode: passthrough; otherwise translation to
// chat-completions at its chat path, and the reply translated back. Routing, aliases,
// balancing, failover and gateway headers are those of the proxy routes.
import type { Endpoint } from '../engine/backends/endpoints.js';
import { GatewayError } from '../engine/kernel/errors.js';
import { definePlugin } from '../engine/kernel/plugin.js';
import { translatedReply, type TranslateOptions } from './lib/msgapi/reply-plan.js';
import { sendUpstream, type SendPolicy } from '../engine/kernel/upstream.js';
import { estimateInputTokens, toChatRequest } from './lib/msgapi/request.js';
import type { MessagesRequest } from './lib/msgapi/types.js';
import { ClientGone } from '../engine/backends/failures.js';

/** Numeric comparison of versions such as 0.11.1 or b4847; undefined when either has no number. */
export function compareVersions(a: string, b: string): number | undefined {
  const pa = a.match(/\d+/g)?.map(Number);
  const pb = b.match(/\d+/g)?.map(Number);
  if (!pa || !pb) return undefined;
  for (let i = 0; i < Math.max(pa.length, pb.length); i++) {
    const d = (pa[i] ?? 0) - (pb[i] ?? 0);
    if (d) return Math.sign(d);
  }
  return 0;
}

type Mode = 'passthrough' | 'translation';
/** Why an endpoint is translated to: its family has no native support, or its version is too old. */
function modeFor(ep: Endpoint, passthroughAllowed: boolean): { mode: Mode; fallback?: 'cannot' | 'translator' } {
  const support = ep.profile.api.msgapi_support;
  if (!support?.enabled) return { mode: 'translation', fallback: 'cannot' };
  if (!passthroughAllowed) return { mode: 'translation', fallback: 'translator' };
  if (support.min_version && ep.version && (compareVersions(ep.version, support.min_version) ?? 0) < 0) return { mode: 'translation', fallback: 'cannot' };
  return { mode: 'passthrough' };
}

interface Options { passthrough: boolean; max_retries?: number; name: string }
interface MsgapiState { mode?: Mode; fallback?: 'cannot' | 'translator'; stream?: boolean; malformed?: number; translation?: TranslateOptions }

export default definePlugin<Options>({
  name: 'translate',
  needs: ['messages-request', 'candidates'],
  uses: ['aliases'],
  terminal: true,
  schema: {
    type: 'object', additionalProperties: false,
    properties: {
      passthrough: { type: 'boolean', default: true, description: 'Forward natively to backends that support the messages API' },
      max_retries: { type: 'integer', minimum: 0, description: 'Default: proxy.max_retries' },
      name: { type: 'string', default: 'msgapi', description: 'Translator name in /internal/stats/translators' },
    },
  },
  apply(hooks, o, env) {
    const maxRetries = o.max_retries ?? env.config.proxy.max_retries;
    const counters = env.stats.translator(o.name);
    const state = (ctx: { state: Record<string, unknown> }) => ((ctx.state.msgapi ??= {}) as MsgapiState);

    const policy: SendPolicy = {
      maxRetries,
      // The messages API is inference: replay-safe on every endpoint.
      replaySafe: () => true,
      request: (ctx, ep) => {
        const st = state(ctx);
        const req = ctx.bodyJson() as MessagesRequest;
        const { mode, fallback } = modeFor(ep, o.passthrough);
        st.mode = mode;
        st.fallback = fallback;
        if (mode === 'passthrough') return { method: 'POST', path: ep.upstreamPath(ep.profile.api.msgapi_support!.messages_path), headers: [], body: ctx.body };
        const model = ctx.routing?.aliasTargets?.get(ep) ?? req.model;
        const chat = toChatRequest(req, { model, topK: ep.profile.request.supports_top_k, streamUsage: ep.profile.request.stream_usage });
        const path = ep.profile.request.parsing_rules?.chat_completions_path ?? '/v1/chat/completions';
        return { method: 'POST', path: ep.upstreamPath(path), headers: [], body: Buffer.from(JSON.stringify(chat)) };
      },
      // Passthrough replies go back as the backend sent them.
      reply: (ctx, status, headers) => {
        const st = state(ctx);
        return st.mode === 'passthrough' ? { kind: 'pipe' } : translatedReply(st.translation!, status, headers);
      },
    };

    hooks.dispatch.tapPromise('translate', async (ctx) => {
      const req = ctx.bodyJson() as MessagesRequest;
      const st = state(ctx);
      st.stream = req.stream === true;
      st.translation = {
        stream: st.stream, model: req.model, inputTokens: estimateInputTokens(req), stopSequences: req.stop_sequences,
        onMalformed: (n) => (st.malformed = (st.malformed ?? 0) + n),
      };
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
