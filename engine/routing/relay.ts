// One upstream attempt, relayed into the client's response as it arrives (its lifecycle:
// attempt-handler.ts). What reaches the client is decided here, with the attempt loop answering
// "could another attempt follow?" each time it matters:
// - a failure status another candidate may fix (the endpoint's retry statuses; a client error of
//   a fallback, or a context-length error when a larger context waits) is held back, not relayed;
// - a stream (SSE, NDJSON) is held back — head and all — until its first content, so an error
//   event, a malformed event, an end without content or a first-token deadline before it can
//   still go to the next candidate; after it, whole events flow as they come (stream-out.ts);
// - a stream that breaks after its content (a reset, a stall, a malformed or error event, an end
//   without its terminator) goes back to the loop open when another candidate may continue it
//   (continuation.ts; that attempt writes no head, its events are spliced in), else ends with an
//   in-stream error and is counted as failed: never a truncated success.
// When no other attempt can follow, the attempt is never abandoned: it is passed through as is.
// What a stream's events mean comes from the terminal step's API (AttemptControl.streams).
import type { Dispatcher } from 'undici';
import type { Endpoint } from '../backends/endpoints.js';
import { ClientGone, StepFailed } from '../backends/failures.js';
import { AttemptHandler, type Controller } from './attempt-handler.js';
import { formatDuration } from '../core/duration.js';
import { gwError } from '../core/errors.js';
import type { ReplyHeaders } from '../core/json.js';
import type { AttemptState } from './attempt-state.js';
import { brokenReason, endBroken } from './broken-stream.js';
import { AttemptFailed, BudgetSpent, RELAYED, type AttemptControl, type HeldReply, type Outcome } from './attempt.js';
import { SpliceOut, type Splice } from './continuation.js';
import { continuationFailure, heldVerdict, holdsStatus } from './decisions.js';
import type { Exchange, SendPolicy } from './exchange.js';
import { PIPE, writeRelayHead, writeWhole, type PipePlan, type ReplyPlan } from './reply.js';
import { StreamOut } from './stream-out.js';
import { StreamWatch, streamFormatOf, type StreamFormat, type StreamShape } from './stream-watch.js';

const HOLD = { kind: 'hold' } as const; // a failure status: read whole (bounded), handed to the loop
const HELD_LIMIT = 64 * 1024;
const HOLD_STREAM_LIMIT = 1024 * 1024; // what a stream may hold before its first content

export class Relay<C extends Exchange> extends AttemptHandler<C> implements Dispatcher.DispatchHandler {
  private plan: ReplyPlan | typeof HOLD = PIPE;
  /** The last chunk relayed: whether a piped stream stopped mid-line decides how it is ended. */
  private lastChunk: Buffer | null = null;
  private readonly chunks: Buffer[] = [];
  private size = 0;
  /** A watched stream: its watcher (first content, errors, terminator), its bytes on their way
   *  out whole events at a time, its format; null: not watched. */
  private watch: StreamWatch | null = null;
  private out!: StreamOut;
  private format: StreamFormat = 'sse';
  /** The stream is held back (with its head) until its first content. */
  private held = false;
  /** This attempt continues a broken stream (its events spliced in), and their way out. */
  private readonly splice: Splice | null = this.ctl.splice;
  private spliceOut: SpliceOut | null = null;
  /** The backend sent an error event in the stream, which went to the client as it was. */
  private relayedError = false;

  constructor(
    ex: C,
    rec: AttemptState,
    ep: Endpoint,
    private readonly policy: Pick<SendPolicy<C>, 'reply'>,
    ctl: AttemptControl,
    resolve: (o: Outcome) => void,
  ) {
    super(ex, rec, ep, ctl, resolve);
    this.arm(ctl.firstTokenMs > 0 ? Math.min(this.sentAt + ctl.firstTokenMs, ctl.budgetEnds) : ctl.budgetEnds);
  }

  /** Nothing of this attempt reached the client yet: it can still be given up for another. */
  private get open(): boolean {
    return this.splice ? this.spliceOut === null || this.held : !this.ex.res.headersSent;
  }

  /** Would another follow a failure now? (A continuation's broken stream: always; it cannot pass.) */
  private retryable(kind: 'stream' | 'first_token'): boolean {
    return (this.splice !== null && kind === 'stream') || this.ctl.canRetry(kind);
  }

  protected onDeadline(): void {
    if (this.settled) return;
    const budget = this.deadlineAt >= this.ctl.budgetEnds;
    if (!this.open) {
      // Under way on the last attempt and still without content: the budget ends the stream.
      if (!this.watch || this.watch.hasContent || !this.controller) return;
      if (!budget) return this.arm(this.ctl.budgetEnds);
      this.endIncomplete("sent no content within the request's budget (proxy.retry.budget)");
      this.settle(RELAYED);
      this.controller.abort(new AttemptFailed('budget_spent', 'stream'));
      return;
    }
    if (budget) this.abort(new BudgetSpent());
    // The first content is late: give up on it only when another attempt can follow.
    else if (this.retryable('first_token')) this.abort(new AttemptFailed(`first_token_timeout (${formatDuration(this.ctl.firstTokenMs)})`, 'first_token'));
    else {
      this.ctl.passedOn();
      // The last attempt: waiting on beats no answer; what is held goes out (a continuation's waits).
      if (this.held && this.controller && !this.splice) this.release(this.controller, this.watch!.completeTo);
      this.arm(this.ctl.budgetEnds);
    }
  }

  onResponseStart(_c: Controller, status: number, headers: ReplyHeaders): void {
    if (status < 200) return; // 1xx informational: the final head follows
    this.status = status;
    this.headers = headers;
    if (this.splice) {
      // A continuation joins only as a stream of the same format; else it is read whole, handed back.
      if (status !== 200 || streamFormatOf(headers['content-type'] as string | undefined) !== this.splice.format) this.plan = HOLD;
      else this.startSplice();
      return;
    }
    if (holdsStatus(status, this.ep.failover.retryStatuses, this.ctl)) {
      if (this.ctl.canRetry('status')) {
        this.plan = HOLD;
        return;
      }
      if (this.ep.failover.retryStatuses.has(status)) this.ctl.passedOn();
    }
    try {
      this.start(status, headers);
    } catch (err) {
      // Ours (a policy or a respond tap threw): undici aborts the request and reports it back.
      throw err instanceof StepFailed ? err : new StepFailed(err);
    }
  }

  private start(status: number, headers: ReplyHeaders): void {
    const plan = (this.plan = this.policy.reply?.(this.ex, status, headers) ?? PIPE);
    if (plan.kind === 'buffer') return;
    const shape = this.ctl.streams;
    const watched = shape !== null && headers['content-length'] === undefined && status !== 204 && status !== 304 && this.ex.method !== 'HEAD';
    const format = watched ? streamFormatOf(headers['content-type'] as string | undefined) : null;
    if (format) this.watched(format, shape!);
    if (format && this.ctl.canRetry('stream')) return this.hold();
    this.writeHead();
  }

  private watched(format: StreamFormat, shape: StreamShape): void {
    this.format = format;
    this.watch = new StreamWatch(format, shape);
    this.out = new StreamOut();
  }

  /** Held until its first content, so it can still go to another candidate. undici's timeouts
   *  covered the head only: a first-token deadline, or a budget that ends before a silence of
   *  stream_idle_timeout would, needs a timer; otherwise each held chunk checks the budget. */
  private hold(): void {
    this.held = true;
    const ft = this.ctl.firstTokenMs;
    const at = ft > 0 ? Math.min(this.sentAt + ft, this.ctl.budgetEnds) : this.ctl.budgetEnds;
    if (ft > 0 || at - performance.now() < this.ep.timeouts.idleMs) this.arm(at, true);
  }

  /** A continuation's stream: watched and held like any until its first content, then its
   *  events spliced into the client's stream under the broken one's plan and head. */
  private startSplice(): void {
    const splice = this.splice!;
    this.plan = splice.plan;
    this.headers = splice.headers;
    this.format = splice.format;
    this.watched(splice.format, this.ctl.streams!);
    this.spliceOut = new SpliceOut(splice, this.ep.name, splice.plan.kind === 'pipe');
    this.hold();
  }

  /** The head of a reply relayed as it comes; a stream is counted on its endpoint while it lasts. */
  private writeHead(): void {
    if (this.splice) {
      this.splice.joined();
      return this.countStream();
    }
    if (!writeRelayHead(this.ex.res, this.plan as Exclude<ReplyPlan, { kind: 'buffer' }>, this.status, this.headers)) return;
    this.rec.streamed = true;
    this.countStream();
  }

  /** A buffer plan's reply outgrew its limit: relay it as the backend sent it after all. */
  private overflowToPipe(controller: Controller, pipe: PipePlan): void {
    this.plan = pipe;
    this.writeHead();
    const held = Buffer.concat(this.chunks, this.size);
    this.chunks.length = 0;
    this.lastChunk = held;
    this.write(controller, held);
  }

  onResponseData(controller: Controller, chunk: Buffer): void {
    const plan = this.plan;
    if (plan.kind === 'hold' || plan.kind === 'buffer') {
      if (plan.kind === 'buffer' && plan.discard) return;
      this.size += chunk.length;
      this.chunks.push(chunk);
      if (plan.kind === 'hold') {
        // Too large to keep: a continuation's refusal is never relayed (enough was read); another
        // failure is the answer after all.
        if (this.size <= HELD_LIMIT) return;
        if (this.splice) controller.abort(continuationFailure(this.status));
        else this.unhold(controller);
        return;
      }
      if (this.size <= plan.limit) return;
      if (!plan.overflow) controller.abort(new Error(`the backend reply is larger than ${plan.limit} bytes`));
      else this.guarded(controller, () => this.overflowToPipe(controller, plan.overflow!));
      return;
    }
    if (this.watch) return this.onStream(controller, this.watch, chunk);
    this.relay(controller, chunk);
  }

  /** A watched stream's chunk: held until its first content, then whole events as they come. */
  private onStream(controller: Controller, watch: StreamWatch, chunk: Buffer): void {
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
      if (seen !== 'content') {
        if (this.retryable('stream')) {
          controller.abort(new AttemptFailed(seen === 'error' ? `stream_error (${watch.problem})` : `malformed_event (${watch.problem})`, 'stream'));
          return;
        }
        this.ctl.passedOn();
      }
      this.held = false;
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

  /** Whole events on their way out: spliced (a continuation), kept (for one), relayed. */
  private pass(controller: Controller, bytes: Buffer | string | null): void {
    if (bytes === null) return;
    if (this.spliceOut && typeof bytes !== 'string') bytes = this.spliceOut.feed(bytes);
    if (bytes.length === 0) return;
    if (typeof bytes === 'string') bytes = Buffer.from(bytes);
    this.ctl.answer?.relayed(this.format, bytes);
    this.relay(controller, bytes);
  }

  /** A stream broke after its content: back to the loop, open, when another may continue it. */
  private breakOff(reason: string): boolean {
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
  private checkBudget(): void {
    if (this.deadlineArmed || this.settled || performance.now() < this.ctl.budgetEnds) return;
    this.arm(this.ctl.budgetEnds, true);
  }

  /** A held failure, shaped as any reply. */
  private unhold(controller: Controller): void {
    const chunks = this.chunks.splice(0);
    this.size = 0;
    if (!this.guarded(controller, () => this.start(this.status, this.headers))) return;
    for (const c of chunks) this.onResponseData(controller, c);
  }

  /** Holding ends before the first content (the last attempt waits on): head, then what is held. */
  private release(controller: Controller, to: number): void {
    this.held = false;
    this.writeHead();
    this.pass(controller, this.out.take(to));
  }

  private relay(controller: Controller, chunk: Buffer): void {
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
      if (chunk.length === 0) return;
      this.lastChunk = chunk;
    }
    this.write(controller, out);
  }

  /** End a started stream with an error in its own format, and count the reply as failed. */
  private endIncomplete(reason: string): void {
    this.splice?.unfinished();
    this.ex.error ??= gwError('UPSTREAM_STREAM_BROKEN', { endpoint: this.ep.name, reason });
    endBroken(this.ex, this.plan as ReplyPlan, this.ep.name, this.headers, this.lastChunk, reason);
  }

  onResponseEnd(controller: Controller): void {
    try {
      const plan = this.plan;
      const res = this.ex.res;
      if (plan.kind === 'hold') return this.endHeld();
      if (plan.kind === 'buffer') writeWhole(res, this.ex.method, plan, this.status, this.headers, Buffer.concat(this.chunks, this.size));
      else if (this.watch && !this.watch.end()) {
        // It stopped without its terminator: before any content another candidate may answer.
        if (this.held && this.retryable('stream')) {
          this.fail(new AttemptFailed('stream_incomplete', 'stream'));
          return;
        }
        const reason = `ended the stream without its terminator (${this.ctl.streams!.terminators})`;
        // Its last event, read whole at the end, is the client's too.
        if (!this.held && !this.relayedError) this.pass(controller, this.out.take(this.watch.completeTo));
        if (this.relayedError) res.end();
        else if (this.breakOff(reason)) return;
        else {
          if (this.held) this.release(controller, this.watch.completeTo);
          this.endIncomplete(reason);
        }
      } else {
        if (this.held) this.writeHead();
        this.held = false;
        // The last event may lack its blank line or newline: it is whole now.
        if (this.watch) this.pass(controller, this.out.takeAll());
        if (this.spliceOut) this.pass(controller, this.spliceOut.end());
        res.end(plan.kind === 'stream' ? plan.end() : undefined);
      }
      this.settle(RELAYED);
    } catch (err) {
      this.fail(err instanceof StepFailed ? err : new StepFailed(err));
    }
  }

  /** A held failure read whole: the answer after all (relayed now), or back to the loop with the
   *  reply kept (decisions.ts, heldVerdict). */
  private endHeld(): void {
    const { status, headers, ctl } = this;
    const body = Buffer.concat(this.chunks, this.size);
    if (this.splice) return this.fail(continuationFailure(this.status));
    const verdict = heldVerdict(
      status,
      this.ep.failover.retryStatuses,
      ctl,
      () => ctl.contextLengthError?.(body.toString('utf8', 0, Math.min(body.length, 4096))) === true,
    );
    const plan = this.policy.reply?.(this.ex, status, headers) ?? PIPE;
    if (verdict !== 'answer') {
      const held: HeldReply = { status, headers, body, plan, endpoint: this.ep, model: ctl.model };
      return this.fail(new AttemptFailed(verdict === 'context_length' ? `context_length (${status})` : String(status), verdict, held));
    }
    writeWhole(this.ex.res, this.ex.method, plan, status, headers, body);
    this.settle(RELAYED);
  }

  /** undici turns a throw from here into an 'error' event nobody listens to (a crash): never throw. */
  onResponseError(_c: Controller, error: Error): void {
    try {
      this.broke(error);
    } catch (err) {
      this.ex.res.destroy();
      this.fail(new StepFailed(err));
    }
  }

  private broke(error: Error): void {
    const ex = this.ex;
    if (this.settled) return;
    if (error instanceof ClientGone || ex.res.destroyed) {
      ex.error = error;
      this.settle(RELAYED);
    } else if (this.open && (error instanceof AttemptFailed || error instanceof BudgetSpent)) {
      // Our own abort (a deadline, a bad event before content): the loop reads it as it is.
      this.fail(error);
    } else if (this.open && (this.held || this.splice) && this.status !== 0 && !(error instanceof StepFailed) && this.retryable('stream')) {
      // A stream (or a continuation's reply) that broke before its first content: nothing of it
      // reached the client, another candidate may answer.
      this.fail(new AttemptFailed(`stream_broken (${brokenReason(error, this.ep)})`, 'stream'));
    } else if (error instanceof StepFailed || this.open) {
      // Nothing reached the client: the loop fails over or answers with an error.
      this.fail(error);
    } else {
      // The head reached the client: no retry; a continuation, or the end of its stream saying why.
      const reason = brokenReason(error, this.ep);
      if (!(error instanceof StepFailed) && this.breakOff(reason)) return;
      this.splice?.unfinished();
      ex.error = error;
      endBroken(ex, this.plan as ReplyPlan, this.ep.name, this.headers, this.lastChunk, reason);
      this.settle(RELAYED);
    }
  }
}
