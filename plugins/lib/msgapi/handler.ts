// One translated attempt: an undici dispatch whose reply is turned into the messages API on
// its way to the client. Streams are translated chunk by chunk (each event written as soon as
// it is formed, with backpressure); other replies are read whole, converted and sent. Backend
// errors keep their status and take the messages API's error shape.
import type { Dispatcher } from 'undici';
import type { Context, UpstreamRequest } from '../../../engine/context.js';
import { writeHead } from '../../../engine/head.js';
import { brokenReason, endAndClose } from '../broken-stream.js';
import { AttemptHandler, ClientGone, dispatchAttempt, startReply, type Controller, type Outcome } from '../relay.js';
import { errorReply, toMessage } from './response.js';
import { eventsForMessage, StreamTranslator, type StreamOptions } from './stream.js';

const MAX_BUFFERED = 64 * 1024 * 1024;

export interface TranslateOptions extends StreamOptions {
  stream: boolean;
  /** Backend chunks skipped as malformed, reported when the reply ends. */
  onMalformed(count: number): void;
}

class TranslateHandler extends AttemptHandler {
  private status = 0;
  private translator: StreamTranslator | null = null;
  private readonly chunks: Buffer[] = [];
  private size = 0;

  constructor(ctx: Context, private readonly o: TranslateOptions, resolve: (o: Outcome) => void) {
    super(ctx, resolve);
  }

  private reported = false;

  protected override settle(o: Outcome): void {
    if (!this.reported && this.translator?.malformed) this.o.onMalformed(this.translator.malformed);
    this.reported = true;
    super.settle(o);
  }

  private head(status: number, contentType: string, length?: number): void {
    const ctx = this.ctx;
    startReply(ctx, status);
    const headers = [...ctx.replyHeaders, 'content-type', contentType];
    if (length !== undefined) headers.push('content-length', String(length));
    else headers.push('cache-control', 'no-cache');
    writeHead(ctx.res, status, headers);
  }

  onResponseStart(_c: Controller, status: number, headers: Record<string, string | string[] | undefined>): void {
    if (status < 200) return;
    this.status = status;
    const type = String(headers['content-type'] ?? '');
    if (status < 300 && this.o.stream && type.includes('text/event-stream')) {
      this.translator = new StreamTranslator(this.o);
      this.head(200, 'text/event-stream');
      this.ctx.res.write(this.translator.start());
    }
  }

  onResponseData(controller: Controller, chunk: Buffer): void {
    if (this.translator) {
      const events = this.translator.feed(chunk);
      if (events && !this.ctx.res.write(events)) {
        controller.pause();
        this.ctx.res.once('drain', () => controller.resume());
      }
      return;
    }
    this.size += chunk.length;
    if (this.size > MAX_BUFFERED) controller.abort(new Error('backend reply too large to translate'));
    else this.chunks.push(chunk);
  }

  onResponseEnd(): void {
    if (this.translator) this.ctx.res.end(this.translator.end());
    else this.finishBuffered();
    this.settle({ relayed: true });
  }

  protected failed(_c: Controller, error: Error): void {
    const ctx = this.ctx;
    if (error instanceof ClientGone || ctx.res.destroyed) {
      ctx.error = error;
      this.settle({ relayed: true });
    } else if (ctx.responseStarted) {
      // Events already reached the client: end its stream with an error event, no retry.
      ctx.error = error;
      const reason = brokenReason(error, ctx.endpoint?.timeouts.idleMs ?? 0);
      if (this.translator) endAndClose(ctx, this.translator.fail(`endpoint ${ctx.endpoint?.name} ${reason}; the reply is incomplete`));
      else ctx.res.destroy();
      this.settle({ relayed: true });
    } else if (this.status) {
      // The reply head arrived but its body broke: nothing reached the client yet.
      ctx.error = error;
      this.send(502, errorReply(502, `the backend reply broke off: ${(error as { code?: string }).code ?? error.message}`));
      this.settle({ relayed: true });
    } else {
      this.settle({ relayed: false, error, sent: this.sent });
    }
  }

  private send(status: number, value: unknown, sse = false): void {
    const body = sse ? eventsForMessage(value as never) : JSON.stringify(value);
    this.head(status, sse ? 'text/event-stream' : 'application/json', Buffer.byteLength(body));
    this.ctx.res.end(body);
  }

  private finishBuffered(): void {
    const text = Buffer.concat(this.chunks, this.size).toString('utf8');
    if (this.status >= 300) {
      this.send(this.status, errorReply(this.status, text));
      return;
    }
    let reply: unknown;
    try {
      reply = JSON.parse(text);
    } catch {
      this.send(502, errorReply(502, 'the backend reply is not chat-completions JSON'));
      return;
    }
    // A backend that ignored `stream` still gets its reply to the client as events.
    this.send(200, toMessage(reply as never, { model: this.o.model, inputTokens: this.o.inputTokens, stopSequences: this.o.stopSequences }), this.o.stream);
  }
}

export function translate(ctx: Context, dispatcher: Dispatcher, up: UpstreamRequest, o: TranslateOptions): Promise<Outcome> {
  return new Promise((resolve) => dispatchAttempt(dispatcher, up, new TranslateHandler(ctx, o, resolve)));
}
