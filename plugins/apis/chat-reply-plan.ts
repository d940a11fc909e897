// How a chat-completions reply becomes another API's reply (the messages API's, the Responses
// API's), as a plan for the relay (engine/routing): a stream is translated chunk by chunk, each
// event written as soon as it is formed; anything else is read whole, converted and sent (as
// events, when the client asked for a stream and the backend ignored it). Backend errors keep
// their status and take the API's error shape.
import type { ReplyHeaders, ReplyPlan } from '../../engine/api.js';
import { usageOf, type ChatStreamReader, type Usage } from './chat-stream.js';

/** A buffered (non-stream) backend reply larger than this is refused rather than held. */
const MAX_BUFFERED = 64 * 1024 * 1024;

export interface ReplyOptions {
  stream: boolean;
  /** Backend chunks skipped as malformed, reported when the reply ends. */
  onMalformed(count: number): void;
  /** The backend's own token counts, when its reply carried `usage`. */
  onUsage(usage: Usage): void;
}

/** What one API makes of a chat-completions reply. */
export interface ReplyApi {
  /** A translator for a stream, with the events that open it. */
  stream(): ChatStreamReader & { start(): string };
  /** A whole reply (parsed JSON) in the API's form, serialised; `usage` is what the backend reported. */
  whole(reply: unknown, usage: Usage | null): string;
  /** The API's events for a whole reply in its form (as whole() gave it). */
  eventsFor(json: string): string;
  /** A backend error body (text) in the API's error shape. */
  error(status: number, body: string): unknown;
}

const JSON_TYPE = ['content-type', 'application/json'];
const json = (status: number, value: unknown) => ({ status, headers: JSON_TYPE, body: JSON.stringify(value) });
const SSE = ['content-type', 'text/event-stream'];

export function chatReplyPlan(o: ReplyOptions, api: ReplyApi, status: number, headers: ReplyHeaders): ReplyPlan {
  if (status < 300 && o.stream && String(headers['content-type'] ?? '').includes('text/event-stream')) {
    const t = api.stream();
    const report = <T>(out: T): T => {
      if (t.malformed) o.onMalformed(t.malformed);
      const usage = t.usage;
      if (usage) o.onUsage(usage);
      return out;
    };
    return {
      kind: 'stream',
      status: 200,
      headers: SSE,
      first: t.start(),
      chunk: (data) => t.feed(data),
      end: () => report(t.end()),
      fail: (message) => report(t.fail(message)),
    };
  }
  return {
    kind: 'buffer',
    limit: MAX_BUFFERED,
    finish(status, body) {
      const text = body.toString('utf8');
      if (status >= 300) return json(status, api.error(status, text));
      let reply: unknown;
      try {
        reply = JSON.parse(text);
      } catch {
        reply = undefined;
      }
      if (!reply || typeof reply !== 'object') return json(502, api.error(502, 'the backend reply is not chat-completions JSON'));
      const u = (reply as { usage?: unknown }).usage;
      const usage = u && typeof u === 'object' ? usageOf(u) : null;
      if (usage) o.onUsage(usage);
      const translated = api.whole(reply, usage);
      return o.stream ? { status: 200, headers: SSE, body: api.eventsFor(translated) } : { status: 200, headers: JSON_TYPE, body: translated };
    },
  };
}
