// A watched stream's way out, for the relay (relay.ts): held — head and all — until its first
// content, so that a failure before it can still go to another candidate; then whole events as
// they come (stream-out.ts), spliced into a broken stream when this attempt continues one
// (continuation.ts); a stream that breaks after its content goes back to the loop when another
// candidate may continue it, else ends with an in-stream error (broken-stream.ts).
import { StepFailed } from '../backends/failures.js';
import { formatDuration } from '../core/duration.js';
import { gwError } from '../core/errors.js';
import { AttemptHandler, type Controller } from './attempt-handler.js';
import { AttemptFailed, RELAYED } from './attempt.js';
import { unwatchFirstToken, watchFirstToken, type AwaitingFirstToken } from './first-token-watch.js';
import { endBroken } from './broken-stream.js';
import { SpliceOut, type Splice } from './continuation.js';
import type { Exchange } from './exchange.js';
import { PIPE, writeRelayHead, type ReplyPlan } from './reply.js';
import { StreamOut } from './stream-out.js';
import { StreamWatch, type StreamFormat, type StreamShape } from './stream-watch.js';

/** A restart (the answer asked for again without a prefill) that cannot join the client's
 *  stream: it differs from what the client has, or ended before passing it. */
export const restartDiffers = () => new AttemptFailed('restart differs from the answer so far', 'client_error');

/** A failure status: read whole (bounded), handed to the loop. */
export const HOLD = { kind: 'hold' } as const;
/** What a stream may hold before its first content. */
const HOLD_STREAM_LIMIT = 1024 * 1024;

export abstract class StreamRelay<C extends Exchange> extends AttemptHandler<C> implements AwaitingFirstToken {
  protected plan: ReplyPlan | typeof HOLD = PIPE;

  /** The last chunk relayed: whether a piped stream stopped mid-line decides how it is ended;
   *  with the one before it, where a reply's usage is read. */
  protected lastChunk: Buffer | null = null;
  protected chunkBefore: Buffer | null = null;
  /** Bytes relayed as they came (not a stream plan's). */
  protected relayedBytes = 0;

  /** A watched stream: its watcher (first content, errors, terminator), its bytes on their way
   *  out whole events at a time, its format; null: not watched. */
  protected watch: StreamWatch | null = null;

  protected out!: StreamOut;

  protected format: StreamFormat = 'sse';

  /** The stream is held back (with its head) until its first content. */
  protected held = false;

  /** This attempt continues a broken stream (its events spliced in), and their way out. */
  protected readonly splice: Splice | null = this.ctl.splice;

  protected spliceOut: SpliceOut | null = null;

  /** The backend sent an error event in the stream, which went to the client as it was. */
  protected relayedError = false;

  /** Would another follow a failure now? (A continuation's broken stream: always; it cannot pass.) */
  protected retryable(kind: 'stream' | 'first_token'): boolean {
    return (this.splice !== null && kind === 'stream') || this.ctl.canRetry(kind);
  }

  protected watched(format: StreamFormat, shape: StreamShape): void {
    this.format = format;
    this.watch = new StreamWatch(format, shape, this.ctl.usageFields);
    this.out = new StreamOut();
  }

  /** Held until its first content, so it can still go to another candidate. undici's timeouts
   *  covered the head only: a first-token deadline, or a budget that ends before a silence of
   *  stream_idle_timeout would, needs a timer; otherwise each held chunk checks the budget. */
  protected hold(): void {
    this.held = true;
    const ft = this.ctl.firstTokenMs;
    const at = ft > 0 ? Math.min(this.sentAt + ft, this.ctl.budgetEnds) : this.ctl.budgetEnds;
    if (ft > 0 || at - performance.now() < this.ep.timeouts.idleMs) this.arm(at, true);
  }

  /** When a learned first-token deadline is due (first-token-watch.ts); 0: none. */
  private firstTokenDue = 0;

  /** A learned first-token deadline: looked at a few times a second from now on. */
  protected watchFirstToken(): void {
    this.firstTokenDue = this.sentAt + this.ctl.learnedFirstTokenMs;
    watchFirstToken(this);
  }

  /** No longer waiting for a first token (it came, the reply is not a held stream, it settled). */
  protected firstTokenDone(): void {
    if (this.firstTokenDue === 0) return;
    this.firstTokenDue = 0;
    unwatchFirstToken(this);
  }

  /** Looked at a few times a second until the stream's first content: past its learned deadline
   *  it is given up for the next candidate when one waits (else waited on). A reply that is
   *  not a stream held for its content is no longer looked at; before any reply head, whether the
   *  request asked for a stream is asked only once the deadline is due. True: no more looking. */
  late(now: number): boolean {
    if (this.settled || (this.status !== 0 && !this.held)) return true;
    if (now < this.firstTokenDue) return false;
    if (this.status === 0 && !this.ctl.streamingRequest()) return true;
    // Left for the warm alternative that made it worth learning (not tried again here), while
    // the fleet's retry budget allows: under overload, streams are not moved around for ever.
    if (this.ctl.mayMoveOn(true)) this.abort(new AttemptFailed(`first_token_timeout (${formatDuration(this.ctl.learnedFirstTokenMs)}, learned)`, 'abandoned'));
    return true;
  }

  /** A continuation's stream: watched and held like any until its first content, then its
   *  events spliced into the client's stream under the broken one's plan and head. */
  protected startSplice(): void {
    const splice = this.splice!;
    this.plan = splice.plan;
    this.headers = splice.headers;
    this.format = splice.format;
    this.watched(splice.format, this.ctl.streams!);
    this.spliceOut = new SpliceOut(splice, this.ep.name, splice.plan.kind === 'pipe');
    this.hold();
  }

  /** The head of a reply relayed as it comes; a stream is counted on its endpoint while it lasts. */
  protected writeHead(): void {
    // A continuation joins the client's stream when its first words go out (SpliceOut).
    if (this.splice) return this.countStream();
    if (!writeRelayHead(this.ex.res, this.plan as Exclude<ReplyPlan, { kind: 'buffer' }>, this.status, this.headers)) return;
    this.rec.streamed = true;
    this.countStream();
  }

  /** A watched stream's chunk: held until its first content, then whole events as they come. */
  protected onStream(controller: Controller, watch: StreamWatch, chunk: Buffer): void {
    if (this.relayedError) return this.relay(controller, chunk);
    const seen = watch.feed(chunk);
    this.out.add(chunk);
    if (this.held) {
      if (seen === 'none') {
        if (this.out.waiting <= HOLD_STREAM_LIMIT) this.checkBudget();
        else if (this.splice) controller.abort(new AttemptFailed('no content in its first MiB', 'stream'));
        else this.release(controller, watch.completeTo);
        return;
      }
      if (seen === 'content') this.firstContent();
      else {
        if (this.retryable('stream')) {
          controller.abort(new AttemptFailed(seen === 'error' ? `stream_error (${watch.problem})` : `malformed_event (${watch.problem})`, 'stream'));
          return;
        }
        this.ctl.passedOn();
      }
      this.held = false;
      this.firstTokenDone();
      this.writeHead();
    }
    if (seen === 'error' || seen === 'malformed') {
      this.pass(controller, this.out.take(watch.badEventAt));
      const reason = seen === 'malformed' ? `sent a malformed event (${watch.problem})` : `sent an error event (${watch.problem})`;
      if (watch.hasContent && this.breakOff(reason)) {
        controller.abort(new AttemptFailed(seen === 'malformed' ? 'malformed_event' : 'stream_error', 'stream'));
        return;
      }
      // Malformed, or in a continuation (its raw events cannot join): the stream's own error.
      if (seen === 'malformed' || this.splice) {
        this.endIncomplete(reason);
        this.settle(RELAYED);
        controller.abort(new AttemptFailed(seen === 'malformed' ? 'malformed_event' : 'stream_error', 'stream'));
        return;
      }
      // The backend's own error event goes to the client as it sent it, and what follows it.
      this.relayedError = true;
      this.ex.error = gwError('UPSTREAM_STREAM_BROKEN', { endpoint: this.ep.name, reason });
      this.pass(controller, this.out.takeAll());
      return;
    }
    // The usual chunk is whole events, nothing waits: it goes as it came.
    this.pass(controller, this.out.take(watch.completeTo));
    // Under way (the last attempt) but still without content: keep-alives do not stop the budget.
    if (!watch.hasContent) this.checkBudget();
  }

  /** The stream's first content came: its time is learned (not a continuation's: it follows a prefill). */
  private firstContent(): void {
    const model = this.ctl.model ?? this.ex.model;
    if (model !== undefined && this.splice === null) this.ep.firstTokens.record(model, this.ctl.sentBytes, performance.now() - this.sentAt);
  }

  /** Whole events on their way out: spliced (a continuation), kept (for one), relayed. */
  protected pass(controller: Controller, bytes: Buffer | string | null): void {
    if (bytes === null) return;
    if (this.spliceOut && typeof bytes !== 'string') {
      bytes = this.spliceOut.feed(bytes);
      if (this.spliceOut.differs) {
        controller.abort(restartDiffers());
        return;
      }
    }
    if (bytes.length === 0) return;
    if (typeof bytes === 'string') bytes = Buffer.from(bytes);
    this.ctl.answer?.relayed(this.format, bytes);
    this.relay(controller, bytes);
  }

  /** A stream broke after its content: back to the loop, open, when another may continue it. */
  protected breakOff(reason: string): boolean {
    // An answer that reached its end already is not asked for again.
    if (!this.watch?.hasContent || this.watch.complete || !this.ctl.answer?.mayContinue()) return false;
    this.settle({
      relayed: 'broken',
      reason,
      format: this.format,
      plan: this.plan as ReplyPlan,
      headers: this.headers,
      endHonestly: () => this.endIncomplete(reason),
    });
    return true;
  }

  /** Still no content, the budget spent: what its timer would have done (hold() sets none). */
  protected checkBudget(): void {
    if (this.deadlineArmed || this.settled || performance.now() < this.ctl.budgetEnds) return;
    this.arm(this.ctl.budgetEnds, true);
  }

  /** Holding ends before the first content (the last attempt waits on): head, then what is held. */
  protected release(controller: Controller, to: number): void {
    this.held = false;
    this.firstTokenDone();
    this.writeHead();
    this.pass(controller, this.out.take(to));
  }

  protected relay(controller: Controller, chunk: Buffer): void {
    const plan = this.plan;
    let out: Buffer | string = chunk;
    if (plan.kind === 'stream') {
      try {
        out = plan.chunk(chunk);
      } catch (err) {
        controller.abort(new StepFailed(err));
        return;
      }
      if (!out) return;
    } else {
      // A watched stream's events before its terminator are content: not filtered.
      if (plan.kind === 'pipe' && plan.filter && (this.watch === null || this.watch.complete)) out = chunk = plan.filter(chunk);
      if (chunk.length === 0) return;
      this.chunkBefore = this.lastChunk;
      this.lastChunk = chunk;
      this.relayedBytes += chunk.length;
    }
    this.write(controller, out);
  }

  /** End a started stream with an error in its own format, and count the reply as failed. */
  protected endIncomplete(reason: string): void {
    this.splice?.unfinished();
    this.ex.error ??= gwError('UPSTREAM_STREAM_BROKEN', { endpoint: this.ep.name, reason });
    endBroken(this.ex, this.plan as ReplyPlan, this.ep.name, this.headers, this.lastChunk, reason);
  }
}
