// How a chat-completions reply becomes a messages-API reply, as a plan for the relay (engine/routing):
// a stream is translated chunk by chunk (each event written as soon as it is formed); anything
// else is read whole, converted and sent. Backend errors keep their status and take the
// messages API's error shape.
import type { ReplyPlan } from '../../../engine/kernel/upstream.js';
import { errorReply, toMessage } from './response.js';
import { eventsForMessage, StreamTranslator, type StreamOptions, type Usage } from './stream.js';
import type { ReplyHeaders } from '../../../engine/core/json.js';

/** A buffered (non-stream) backend reply larger than this is refused rather than held. */
const MAX_BUFFERED = 64 * 1024 * 1024;

export interface TranslateOptions extends StreamOptions {
  stream: boolean;
  /** Backend chunks skipped as malformed, reported when the reply ends. */
  onMalformed(count: number): void;
  /** The backend's own token counts, when its reply carried `usage`. */
  onUsage(usage: Usage): void;
}

const json = (status: number, value: unknown) => ({ status, headers: ['content-type', 'application/json'], body: JSON.stringify(value) });

const count = (n: unknown) => (typeof n === 'number' && Number.isFinite(n) && n >= 0 ? n : undefined);

export function translatedReply(o: TranslateOptions, status: number, headers: ReplyHeaders): ReplyPlan {
  if (status < 300 && o.stream && String(headers['content-type'] ?? '').includes('text/event-stream')) {
    const t = new StreamTranslator(o);
    const report = <T>(out: T): T => {
      if (t.malformed) o.onMalformed(t.malformed);
      const usage = t.usage;
      if (usage) o.onUsage(usage);
      return out;
    };
    return {
      kind: 'stream', status: 200, headers: ['content-type', 'text/event-stream'], first: t.start(),
      chunk: (data) => t.feed(data),
      end: () => report(t.end()),
      fail: (message) => report(t.fail(message)),
    };
  }
  return {
    kind: 'buffer', limit: MAX_BUFFERED,
    finish(status, body) {
      const text = body.toString('utf8');
      if (status >= 300) return json(status, errorReply(status, text));
      let reply: unknown;
      try {
        reply = JSON.parse(text);
      } catch {
        return json(502, errorReply(502, 'the backend reply is not chat-completions JSON'));
      }
      const usage = (reply as { usage?: { prompt_tokens?: unknown; completion_tokens?: unknown } } | null)?.usage;
      if (usage) o.onUsage({ input: count(usage.prompt_tokens), output: count(usage.completion_tokens) });
      const message = toMessage(reply as never, { model: o.model, inputTokens: o.inputTokens, stopSequences: o.stopSequences });
      // A backend that ignored `stream` still gets its reply to the client as events.
      return o.stream ? { status: 200, headers: ['content-type', 'text/event-stream'], body: eventsForMessage(message) } : json(200, message);
    },
  };
}
