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
// What a stream's events mean comes from the terminal step's API (AttemptControl.streams); a
// watched stream's way out (holding, whole events, splicing, breaking off) is relay-stream.ts's.
import type { Dispatcher } from 'undici';
import type { Endpoint } from '../backends/endpoints.js';
import { ClientGone, StepFailed } from '../backends/failures.js';
import type { Controller } from './attempt-handler.js';
import { formatDuration } from '../core/duration.js';
import type { ReplyHeaders } from '../core/json.js';
import type { AttemptState } from './attempt-state.js';
import { brokenReason, endBroken } from './broken-stream.js';
import { AttemptFailed, BudgetSpent, RELAYED, type AttemptControl, type HeldReply, type Outcome } from './attempt.js';
import { continuationFailure, heldVerdict, holdsStatus } from './decisions.js';
import type { Exchange, SendPolicy } from './exchange.js';
import { PIPE, writeWhole, type PipePlan, type ReplyPlan } from './reply.js';
import { HOLD, restartDiffers, StreamRelay } from './relay-stream.js';
import { streamFormatOf } from './stream-watch.js';
import { addUsage, attemptUsage, noUsage, USAGE_TAIL_BYTES } from './usage.js';

const HELD_LIMIT = 64 * 1024;
/** A stream under way on an endpoint found down breaks off if it stays silent this long. */
export const STALL_MS = 1_000;

export class Relay<C extends Exchange> extends StreamRelay<C> implements Dispatcher.DispatchHandler {
  private readonly chunks: Buffer[] = [];

  private size = 0;
  /** Body chunks received: whether a stream is still moving. */
  private chunksIn = 0;

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
    if (ctl.learnedFirstTokenMs > 0) this.watchFirstToken();
  }

  /** A reply that reached the client is counted (while tokens are counted): what its engine
   *  reported — in the stream's events, or at the end of its body — the rest estimated; a
   *  failure status used none. */
  protected override settle(o: Outcome): void {
    this.firstTokenDone();
    const fields = this.ctl.usageFields;
    if (fields !== null && !this.settled && o.relayed !== false) {
      const ok = this.status >= 200 && this.status < 300;
      const w = this.watch;
      const reported = !ok ? null : w ? w.reported : fields.read(this.tailBytes());
      const bytes = this.plan.kind === 'buffer' ? this.size : this.relayedBytes;
      this.rec.usage = addUsage(this.rec.usage, ok ? attemptUsage(reported, this.ctl.sentBytes, w?.events ?? 0, bytes) : noUsage());
      if (reported?.finish !== undefined) (this.rec.finishReasons ??= []).push(reported.finish);
    }
    super.settle(o);
  }

  /** The last bytes of the reply body. */
  private tailBytes(): Buffer {
    const last = this.lastChunk;
    // The usual reply: one chunk, or a last chunk that holds the whole tail.
    if (this.plan.kind !== 'buffer' && last !== null && (this.chunkBefore === null || last.length >= USAGE_TAIL_BYTES)) {
      return last.length > USAGE_TAIL_BYTES ? last.subarray(last.length - USAGE_TAIL_BYTES) : last;
    }
    const parts = this.plan.kind === 'buffer' ? this.chunks : [this.chunkBefore, last];
    const out: Buffer[] = [];
    let size = 0;
    for (let i = parts.length - 1; i >= 0 && size < USAGE_TAIL_BYTES; i--) {
      const c = parts[i];
      if (!c) continue;
      out.unshift(c);
      size += c.length;
    }
    return Buffer.concat(out, size).subarray(Math.max(0, size - USAGE_TAIL_BYTES));
  }

  /** Nothing of this attempt reached the client yet: it can still be given up for another. */
  private get open(): boolean {
    return this.splice ? this.spliceOut === null || this.held || !this.spliceOut.joined : !this.ex.res.headersSent;
  }

  protected onDeadline(): void {
    if (this.settled) return;
    const budget = this.deadlineAt >= this.ctl.budgetEnds;
    // The first content came (a continuation still catching up to what the client has, say): a
    // first-token deadline is met; the budget's may still be due.
    if (!budget && this.watch?.hasContent) return this.arm(this.ctl.budgetEnds);
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

  /** Its endpoint was found down. Nothing relayed yet: given up when another candidate waits (a
   *  hung engine would hold it for the whole reply timeout). A stream under way that may be
   *  continued: broken off if it stays silent for STALL_MS. Anything else finishes as it can. */
  endpointDown(reason: string): void {
    if (this.settled) return;
    // No reply head yet, or a stream's head and no content yet: nothing of it is under way.
    if (this.status === 0 || (this.held && this.watch?.hasContent === false)) {
      if (this.ctl.mayMoveOn()) this.abort(new AttemptFailed(`abandoned (endpoint ${reason})`, 'abandoned'));
      return;
    }
    if (this.open || this.watch === null || !this.ctl.answer?.couldContinue()) return;
    const seen = this.chunksIn;
    setTimeout(() => {
      try {
        if (!this.settled && this.chunksIn === seen) this.abort(new AttemptFailed(`stalled on an endpoint found down (${reason})`, 'stream'));
      } catch (err) {
        this.ex.log.error({ req: this.ex.id, err }, 'a stalled stream could not be broken off');
      }
    }, STALL_MS).unref();
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
    this.firstTokenDone();
    this.writeHead();
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
    this.chunksIn++;
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

  /** A held failure, shaped as any reply. */
  private unhold(controller: Controller): void {
    const chunks = this.chunks.splice(0);
    this.size = 0;
    if (!this.guarded(controller, () => this.start(this.status, this.headers))) return;
    for (const c of chunks) this.onResponseData(controller, c);
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
        if (this.spliceOut?.joined === false) {
          // A restart that never passed what the client has (shorter, or it differed) cannot join;
          // a continuation that had no word to add finished the answer all the same.
          if (this.splice!.restart) return this.fail(restartDiffers());
          this.splice!.joined();
        }
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
