// The messages API over chat-completions engines (apis/api-translator.ts): passthrough to an
// endpoint whose profile declares native support (api.msgapi_support, min_version respected) —
// the original bytes to its messages_path, less Claude Code's billing block toward local
// backends, errors put in the messages API's shape — else translation to chat-completions.
import { gwError, type PluginEnv } from '../../../engine/api.js';
import type { ApiTranslator } from '../api-translator.js';
import { isLocalFamily } from './billing.js';
import { translationProblem } from './check.js';
import { estimateInputTokens } from './estimate.js';
import { isMessagesApiHeader } from './headers.js';
import { modeFor } from './mode.js';
import { passthroughBody, passthroughReply } from './passthrough.js';
import { translatedReply, type TranslateOptions } from './reply-plan.js';
import { toChatRequest } from './request.js';
import type { MessagesRequest } from './types.js';

export function msgapiTranslator(env: PluginEnv, passthrough: boolean): ApiTranslator<TranslateOptions> {
  const { strip_billing_header: stripBilling, thinking_effort: thinkingEffort } = env.config.translators.msgapi;
  return {
    way(ep) {
      const { mode, fallback } = modeFor(ep, passthrough);
      return mode === 'passthrough' ? { mode, path: ep.profile.api.msgapi_support!.messages_path } : { mode, fallback: fallback! };
    },
    nativeBody: (ctx, ep) => passthroughBody(ctx, ep, stripBilling),
    nativeReply: passthroughReply,
    prepare(ctx, reply) {
      const req = ctx.bodyJson() as MessagesRequest;
      const why = translationProblem(req);
      if (why) throw gwError('BAD_REQUEST', { reason: why });
      return { ...reply, model: req.model, inputTokens: estimateInputTokens(req), stopSequences: req.stop_sequences };
    },
    chatBody(ctx, ep, model, _p, dropped) {
      const req = ctx.bodyJson() as MessagesRequest;
      return toChatRequest(req, {
        model: model ?? req.model,
        topK: ep.profile.request.supports_top_k,
        streamUsage: ep.profile.request.stream_usage,
        effortLevels: thinkingEffort ? ep.profile.request.reasoning_effort : [],
        reasoningHistory: isLocalFamily(ep.profile),
        dropBillingHeader: stripBilling && isLocalFamily(ep.profile),
        dropped,
      });
    },
    reply: translatedReply,
    omitClientHeader: isMessagesApiHeader,
  };
}
