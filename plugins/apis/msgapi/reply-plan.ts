// A chat-completions reply as a messages-API reply (apis/chat-reply-plan.ts does the relaying).
import type { ReplyHeaders, ReplyPlan } from '../../../engine/api.js';
import { chatReplyPlan, type ReplyOptions } from '../chat-reply-plan.js';
import { errorReply, toMessage } from './response.js';
import { eventsForMessage, StreamTranslator, type StreamOptions } from './stream.js';
import type { Message } from './types.js';

export interface TranslateOptions extends StreamOptions, ReplyOptions {}

export function translatedReply(o: TranslateOptions, status: number, headers: ReplyHeaders): ReplyPlan {
  return chatReplyPlan(
    o,
    {
      stream: () => new StreamTranslator(o),
      whole: (reply) => JSON.stringify(toMessage(reply as never, { model: o.model, inputTokens: o.inputTokens, stopSequences: o.stopSequences })),
      eventsFor: (json) => eventsForMessage(JSON.parse(json) as Message),
      error: errorReply,
    },
    status,
    headers,
  );
}
