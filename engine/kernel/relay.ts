// One upstream attempt, relayed into the client's response as it arrives (backpressure both
// ways). It settles exactly once, and cancels the upstream request when the client goes away.
// What reaches the client is decided here, with the kernel's loop (upstream.ts) answering one
// question, "could another attempt follow?", each time it matters:
// - a failure status another candidate may fix (the endpoint's retry statuses; a client error of
//   a fallback, or a context-length error when a larger context waits) is held back, not relayed;
// - a stream (SSE, NDJSON) is held back — head and all — until its first content, so an error
//   event, a malformed event, an end without content or a first-token deadline before it can
//   still go to the next candidate; after it, bytes flow as they come;
// - a stream that ends without its terminator, or breaks, ends with an in-stream error and is
//   counted as failed: never a truncated success.
// When no other attempt can follow, the attempt is never abandoned: it is passed through as is.
import type { Dispatcher } from 'undici';
import type { Endpoint } from '../backends/endpoints.js';
import { ClientGone, StepFailed } from '../backends/failures.js';
import { brokenReason, endAndClose, endBroken } from './broken-stream.js';
import type { Context } from './context.js';
import { formatDuration } from '../core/duration.js';
import { gwError } from '../core/errors.js';
import type { ReplyHeaders } from '../core/json.js';
import { streamFormatOf, StreamWatch } from './stream-watch.js';

type Controller = Dispatcher.DispatchController;

/** How a reply is shaped on its way to the client, decided when the backend's head arrives. */
export type ReplyPlan =
  /** As the backend sent it: status, headers (less hop-by-hop ones) and body, chunk by chunk;
   *  `headers` (flat) are added to the backend's. */
  | { kind: 'pipe'; headers?: string[] }
  /** A translated stream: a head of our own, each backend chunk turned into output as it comes. */
  | { kind: 'stream'; status: number; headers: string[]; first?: string; chunk(data: Buffer): string; end(): string; fail(reason: string): string }
  /** Read whole, then answered: `finish` builds the reply from the backend's status and body.
   *  Past `limit` the request fails, or, given an `overflow` pipe plan, the reply is relayed as
   *  that plan says after all (what was read first, then the rest as it comes). */
  | { kind: 'buffer'; limit: number; overflow?: PipePlan; discard?: false; finish: BufferFinish }
  /** The same, for a reply whose body is never used: read to its end and dropped as it comes
   *  (nothing kept, so no limit); `finish` gets an empty body. */
  | { kind: 'buffer'; discard: true; finish: BufferFinish };

type BufferFinish = (status: number, body: Buffer) => { status: number; headers: string[]; body: string | Buffer };
export type PipePlan = Extract<ReplyPlan, { kind: 'pipe' }>;

/** The reply policy of a terminal step, as far as the relay needs it. */
export interface ReplyPolicy {
  reply?(ctx: Context, status: number, headers: ReplyHeaders): ReplyPlan | undefined;
}

/** A whole backend answer held back while another candidate was tried. */
export interface HeldReply {
  status: number;
  headers: ReplyHeaders;
  body: Buffer;
  endpoint: Endpoint;
  model: string | undefined;
}

/** An attempt that failed in a way another candidate may fix: a held status, a stream that
 *  failed before its first content, a first-token deadline. */
export class AttemptFailed extends Error {
  constructor(readonly outcome: string, readonly held: HeldReply | null = null, readonly clientError = false) {
    super(`attempt failed: ${outcome}`);
  }
}

/** The request's overall budget (proxy.retry.budget) ran out before its reply started. */
export class BudgetSpent extends Error {
  constructor() {
    super('the request budget ran out');
  }
}

/** What the kernel's loop tells one attempt. */
export interface AttemptControl {
  /** Could another attempt follow now (attempts, budget, fleet retry budget)? */
  canRetry(): boolean;
  /** A failure another attempt might have fixed is passed on as it is (counted when the fleet
   *  retry budget is what stopped the retry). */
  passedOn(): void;
  /** A later candidate has a larger context window: a context-length error is worth holding. */
  contextFallback: boolean;
  /** A client error is a failure too (a fallback model rejected what the primary accepted). */
  clientErrorsFail: boolean;
  /** Milliseconds to the first content of a stream before the attempt is abandoned; 0: none. */
  firstTokenMs: number;
  /** The request runs a model: a streamed reply is watched (first content, terminator). Other
   *  streams (a model pull's progress) are piped as they are. */
  watch: boolean;
  /** performance.now() at which the request's budget ends. */
  budgetEnds: number;
}

/** How one attempt ended: relayed (fully or cut after the first byte), or failed before any
 *  byte reached the client — `sent` when undici had started the request on a connected socket,
 *  `answered` when the backend's reply head had arrived. */
export type Outcome = { relayed: true } | { relayed: false; error: Error; sent: boolean; answered: boolean };
const RELAYED: Outcome = { relayed: true };
const PIPE: ReplyPlan = { kind: 'pipe' };
/** A held failure status: read whole (bounded), then handed to the kernel. */
const HOLD = { kind: 'hold' } as const;
const HELD_LIMIT = 64 * 1024;
/** What a stream may hold back before its first content (keep-alives, role chunks). */
const HOLD_STREAM_LIMIT = 1024 * 1024;
const CONTEXT_ERROR = /context.{0,20}(length|window|size)|maximum context|too (long|many tokens)|exceeds? (the )?(available |max(imum)? )?(context|tokens)|n_ctx|prompt is too long/i;

const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-authenticate', 'proxy-authorization', 'te', 'trailer', 'transfer-encoding', 'upgrade']);
const HOP_BY_HOP_AND_LENGTH = new Set([...HOP_BY_HOP, 'content-length']);

/** The backend's headers as a flat list, less hop-by-hop ones; `withLength: false` drops
 *  Content-Length too (a body the kernel measures again: a buffer plan's). */
export function backendHeaders(headers: ReplyHeaders, withLength = true): string[] {
  const skip = withLength ? HOP_BY_HOP : HOP_BY_HOP_AND_LENGTH;
  const out: string[] = [];
  for (const name in headers) {
    const value = headers[name];
    if (value === undefined || skip.has(name)) continue;
    if (typeof value === 'string') out.push(name, value);
    else for (const v of value) out.push(name, v);
  }
  return out;
}

/** Answer with a whole backend reply (held back earlier), shaped by the step's plan as it would
 *  have been had it been relayed at once. */
export function relayWhole(ctx: Context, policy: ReplyPolicy, held: { status: number; headers: ReplyHeaders; body: Buffer }): void {
  const plan = policy.reply?.(ctx, held.status, held.headers) ?? PIPE;
  const res = ctx.res;
  const head = ctx.method === 'HEAD';
  if (plan.kind === 'buffer') {
    const reply = plan.finish(held.status, plan.discard ? Buffer.alloc(0) : held.body);
    const body = typeof reply.body === 'string' ? Buffer.from(reply.body) : reply.body;
    res.writeHead(reply.status, [...reply.headers, 'content-length', String(body.length)]);
    res.end(head ? undefined : body);
  } else if (plan.kind === 'stream') {
    res.writeHead(plan.status, [...plan.headers, 'cache-control', 'no-cache']);
    res.end((plan.first ?? '') + plan.chunk(held.body) + plan.end());
  } else {
    // A HEAD reply keeps the backend's Content-Length: its body was never there to measure.
    const out = backendHeaders(held.headers, head);
    if (plan.headers) for (const h of plan.headers) out.push(h);
    if (!head) out.push('content-length', String(held.body.length));
    res.writeHead(held.status, out);
    res.end(head ? undefined : held.body);
  }
}

export class Relay implements Dispatcher.DispatchHandler {
  private controller: Controller | null = null;
  private settled = false;
  private readonly sentAt = performance.now();
  private sent = false;
  private status = 0;
  private headers: ReplyHeaders = {};
  private plan: ReplyPlan | typeof HOLD = PIPE;
  /** The last chunk relayed: whether a piped stream stopped mid-line decides how it is ended. */
  private lastChunk: Buffer | null = null;
  /** The endpoint whose active-stream count this reply holds, while it streams. */
  private streaming: Endpoint | null = null;
  private readonly chunks: Buffer[] = [];
  private size = 0;
  /** A stream's watcher (first content, error events, terminator); null: not a stream. */
  private watch: StreamWatch | null = null;
  /** A stream's chunks held back (with its head) until its first content; null: flowing. */
  private held: Buffer[] | null = null;
  /** The backend sent an error event in the stream, which went to the client as it was. */
  private relayedError = false;
  private timer: NodeJS.Timeout | null = null;
  /** What the timer was set for (performance.now() time). */
  private timerAt = 0;
  /** Bytes held back in `held`. */
  private heldSize = 0;
  /** A deadline passed before the request started: it is aborted when it does. */
  private abortWith: Error | null = null;
  private readonly onClientClose = () => {
    if (!this.ctx.res.writableFinished) this.controller?.abort(new ClientGone());
  };

  constructor(private readonly ctx: Context, private readonly ep: Endpoint, private readonly policy: ReplyPolicy, private readonly ctl: AttemptControl, private readonly resolve: (o: Outcome) => void) {
    ctx.res.once('close', this.onClientClose);
    this.arm(ctl.firstTokenMs > 0 ? Math.min(this.sentAt + ctl.firstTokenMs, ctl.budgetEnds) : ctl.budgetEnds);
  }

  /** The backend's final reply head arrived: it has run the request. */
  private get answered(): boolean {
    return this.status !== 0;
  }

  /** Nothing reached the client yet: the attempt can still be given up for another. */
  private get open(): boolean {
    return !this.ctx.res.headersSent;
  }

  /** A timer for the next deadline of this attempt (first content, the budget), when it falls
   *  before the endpoint's own reply timeout would (that one is undici's; within 1 % of it too). */
  private arm(at: number, always = false): void {
    const ms = at - performance.now();
    if (!always && !(ms < this.ep.timeouts.responseMs * 0.99)) return;
    if (!(ms < Infinity)) return;
    if (this.timer) clearTimeout(this.timer);
    this.timerAt = at;
    this.timer = setTimeout(() => this.deadline(), Math.max(0, ms));
  }

  /** A timer callback: nothing may escape it (a respond tap that throws while the held head is
   *  written would end the process). */
  private deadline(): void {
    try {
      this.onDeadline();
    } catch (err) {
      this.abort(err instanceof StepFailed ? err : new StepFailed(err));
    }
  }

  private onDeadline(): void {
    this.timer = null;
    if (this.settled) return;
    // By what the timer was set for: a timer may fire a fraction of a millisecond early.
    const budget = this.timerAt >= this.ctl.budgetEnds;
    if (!this.open) {
      // Under way on the last attempt and still without content: the budget ends the stream.
      if (!this.watch || this.watch.hasContent || !this.controller) return;
      if (!budget) return this.arm(this.ctl.budgetEnds);
      this.endIncomplete("sent no content within the request's budget (proxy.retry.budget)");
      this.settle(RELAYED);
      this.controller.abort(new AttemptFailed('budget_spent'));
      return;
    }
    if (budget) this.abort(new BudgetSpent());
    // The first content is late: give up on it only when another attempt can follow.
    else if (this.ctl.canRetry()) this.abort(new AttemptFailed(`first_token_timeout (${formatDuration(this.ctl.firstTokenMs)})`));
    else {
      this.ctl.passedOn();
      // The last attempt: waiting on beats no answer, and what is held goes out now.
      if (this.held && this.controller) this.release(this.controller);
      this.arm(this.ctl.budgetEnds);
    }
  }

  /** Give the attempt up: now, or as soon as undici hands over its controller (still connecting). */
  private abort(reason: Error): void {
    if (this.controller) this.controller.abort(reason);
    else this.abortWith = reason;
  }

  private settle(o: Outcome): void {
    if (this.settled) return;
    this.settled = true;
    if (this.timer) clearTimeout(this.timer);
    // Here, not after the await: the done hook may run before sendUpstream resumes.
    this.ctx.upstreamMs += performance.now() - this.sentAt;
    if (this.streaming) this.streaming.streams--;
    this.ctx.res.off('close', this.onClientClose);
    this.resolve(o);
  }

  onRequestStart(controller: Controller): void {
    this.controller = controller;
    this.sent = true;
    if (this.abortWith) controller.abort(this.abortWith);
    else if (this.ctx.res.destroyed) controller.abort(new ClientGone());
  }

  onResponseStart(_c: Controller, status: number, headers: ReplyHeaders): void {
    if (status < 200) return; // 1xx informational: the final head follows
    this.status = status;
    this.headers = headers;
    if (this.holds(status)) {
      if (this.ctl.canRetry()) {
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

  /** Is this status one another candidate may do better than? Client errors only when the
   *  kernel says so (a fallback, a context-length error with a larger context waiting). */
  private holds(status: number): boolean {
    if (this.ep.failover.retryStatuses.has(status)) return true;
    return status >= 400 && status < 500 && (this.ctl.contextFallback || this.ctl.clientErrorsFail);
  }

  private start(status: number, headers: ReplyHeaders): void {
    const plan = (this.plan = this.policy.reply?.(this.ctx, status, headers) ?? PIPE);
    if (plan.kind === 'buffer') return;
    const watched = this.ctl.watch && headers['content-length'] === undefined && status !== 204 && status !== 304 && this.ctx.method !== 'HEAD';
    const format = watched ? streamFormatOf(headers['content-type'] as string | undefined) : null;
    if (format) this.watch = new StreamWatch(format);
    if (format && this.ctl.canRetry()) {
      // Held until its first content, so it can still go to another candidate. undici's timeouts
      // covered the head only: a first-token deadline, or a budget that ends before a silence
      // of stream_idle_timeout would, needs a timer; otherwise each held chunk checks the budget.
      this.held = [];
      const ft = this.ctl.firstTokenMs;
      const at = ft > 0 ? Math.min(this.sentAt + ft, this.ctl.budgetEnds) : this.ctl.budgetEnds;
      if (ft > 0 || at - performance.now() < this.ep.timeouts.idleMs) this.arm(at, true);
      return;
    }
    this.writeHead();
  }

  private writeHead(): void {
    const plan = this.plan;
    if (plan.kind === 'stream') {
      this.ctx.res.writeHead(plan.status, [...plan.headers, 'cache-control', 'no-cache']);
      this.streamStarted();
      if (plan.first) this.ctx.res.write(plan.first);
    } else if (plan.kind === 'pipe') this.pipeHead(this.status, this.headers, plan.headers);
  }

  private pipeHead(status: number, headers: ReplyHeaders, extra: string[] | undefined): void {
    const out = backendHeaders(headers);
    if (extra) for (const h of extra) out.push(h);
    this.ctx.res.writeHead(status, out);
    // A reply without a length is a stream: send the head now so the client sees it before the first event.
    if (headers['content-length'] === undefined) {
      this.ctx.res.flushHeaders();
      this.streamStarted();
    }
  }

  /** The reply is a stream: counted on its endpoint while it lasts (active streams). */
  private streamStarted(): void {
    this.ctx.streamed = true;
    if (!this.streaming) {
      this.ep.streams++;
      this.streaming = this.ep;
    }
  }

  /** A buffer plan's reply outgrew its limit: relay it as the backend sent it after all. */
  private overflowToPipe(controller: Controller, pipe: PipePlan): void {
    this.plan = pipe;
    this.pipeHead(this.status, this.headers, pipe.headers);
    const held = Buffer.concat(this.chunks, this.size);
    this.chunks.length = 0;
    this.lastChunk = held;
    this.write(controller, held);
  }

  private write(controller: Controller, out: Buffer | string): void {
    if (this.ctx.firstChunkMs === 0) this.ctx.firstChunkMs = this.ctx.elapsedMs();
    if (!this.ctx.res.write(out)) {
      controller.pause();
      this.ctx.res.once('drain', () => controller.resume());
    }
  }

  onResponseData(controller: Controller, chunk: Buffer): void {
    const plan = this.plan;
    if (plan.kind === 'hold') {
      this.size += chunk.length;
      this.chunks.push(chunk);
      if (this.size > HELD_LIMIT) this.unhold(controller);
      return;
    }
    if (plan.kind === 'buffer') {
      if (plan.discard) return;
      this.size += chunk.length;
      this.chunks.push(chunk);
      if (this.size <= plan.limit) return;
      if (!plan.overflow) {
        controller.abort(new Error(`the backend reply is larger than ${plan.limit} bytes`));
        return;
      }
      try {
        this.overflowToPipe(controller, plan.overflow);
      } catch (err) {
        controller.abort(new StepFailed(err));
      }
      return;
    }
    const watch = this.watch;
    if (watch) {
      const seen = watch.feed(chunk);
      if (this.held) {
        if (seen === 'none') {
          this.held.push(chunk);
          this.heldSize += chunk.length;
          if (this.heldSize > HOLD_STREAM_LIMIT) this.release(controller);
          else this.checkBudget();
          return;
        }
        if (seen !== 'content') {
          if (this.ctl.canRetry()) {
            controller.abort(new AttemptFailed(seen === 'error' ? `stream_error (${watch.problem})` : `malformed_event (${watch.problem})`));
            return;
          }
          this.ctl.passedOn();
        }
        this.release(controller);
      }
      if (seen === 'malformed') {
        this.relay(controller, chunk.subarray(0, Math.max(0, watch.badEventStart)));
        this.endIncomplete(`sent a malformed event (${watch.problem})`);
        this.settle(RELAYED);
        controller.abort(new AttemptFailed('malformed_event'));
        return;
      }
      if (seen === 'none' && !watch.hasContent) {
        // Under way (the last attempt) but still without content: keep-alives do not stop the budget.
        this.relay(controller, chunk);
        this.checkBudget();
        return;
      }
      if (seen === 'error') {
        this.relayedError = true;
        this.ctx.error = gwError('UPSTREAM_STREAM_BROKEN', { endpoint: this.ep.name, reason: `sent an error event (${watch.problem})` });
      }
    }
    this.relay(controller, chunk);
  }

  /** Still no content and the budget is spent: what its timer would have done (a timer is set
   *  only when the budget ends before a silence of stream_idle_timeout would). */
  private checkBudget(): void {
    if (this.timer || this.settled || performance.now() < this.ctl.budgetEnds) return;
    this.timerAt = this.ctl.budgetEnds;
    this.onDeadline();
  }

  /** A held failure too large to keep: it is the answer after all, shaped as any reply. */
  private unhold(controller: Controller): void {
    const chunks = this.chunks.splice(0);
    this.size = 0;
    try {
      this.start(this.status, this.headers);
    } catch (err) {
      controller.abort(new StepFailed(err));
      return;
    }
    for (const c of chunks) this.onResponseData(controller, c);
  }

  /** The first content arrived (or holding ends for another reason): head, then what was held. */
  private release(controller: Controller): void {
    const held = this.held!;
    this.held = null;
    this.writeHead();
    if (held.length > 0) this.relay(controller, held.length === 1 ? held[0] : Buffer.concat(held, this.heldSize));
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
    const ctx = this.ctx;
    ctx.error ??= gwError('UPSTREAM_STREAM_BROKEN', { endpoint: this.ep.name, reason });
    const plan = this.plan;
    if (plan.kind === 'stream') endAndClose(ctx, plan.fail(`endpoint ${this.ep.name} ${reason}; the reply is incomplete`));
    else endBroken(ctx, this.headers, this.lastChunk, reason);
  }

  onResponseEnd(controller: Controller): void {
    try {
      const plan = this.plan;
      const res = this.ctx.res;
      if (plan.kind === 'hold') return this.endHeld();
      if (plan.kind === 'buffer') {
        const reply = plan.finish(this.status, Buffer.concat(this.chunks, this.size));
        res.writeHead(reply.status, [...reply.headers, 'content-length', String(typeof reply.body === 'string' ? Buffer.byteLength(reply.body) : reply.body.length)]);
        res.end(this.ctx.method === 'HEAD' ? undefined : reply.body);
      } else if (this.watch && !this.watch.end()) {
        // It stopped without its terminator: before any content another candidate may answer.
        if (this.held && this.ctl.canRetry()) {
          this.settle({ relayed: false, error: new AttemptFailed('stream_incomplete'), sent: true, answered: true });
          return;
        }
        if (this.held) this.release(controller);
        if (this.relayedError) res.end();
        else this.endIncomplete('ended the stream without its terminator ([DONE], finish_reason, message_stop or done: true)');
      } else {
        if (this.held) this.release(controller);
        res.end(plan.kind === 'stream' ? plan.end() : undefined);
      }
      this.settle(RELAYED);
    } catch (err) {
      this.settle({ relayed: false, error: err instanceof StepFailed ? err : new StepFailed(err), sent: true, answered: true });
    }
  }

  /** A held failure read whole: a client error that is not about the context is the answer after
   *  all (relayed now); anything else goes back to the kernel with the reply kept. */
  private endHeld(): void {
    const body = Buffer.concat(this.chunks, this.size);
    const status = this.status;
    const clientError = status >= 400 && status < 500 && !this.ep.failover.retryStatuses.has(status);
    if (clientError && this.ctl.contextFallback && CONTEXT_ERROR.test(body.toString('utf8', 0, Math.min(body.length, 4096)))) {
      this.settle({ relayed: false, error: new AttemptFailed(`context_length (${status})`, this.heldReply(body)), sent: true, answered: true });
      return;
    }
    if (clientError && !this.ctl.clientErrorsFail) {
      relayWhole(this.ctx, this.policy, { status, headers: this.headers, body });
      this.settle(RELAYED);
      return;
    }
    this.settle({ relayed: false, error: new AttemptFailed(String(status), this.heldReply(body), clientError), sent: true, answered: true });
  }

  private heldReply(body: Buffer): HeldReply {
    return { status: this.status, headers: this.headers, body, endpoint: this.ep, model: this.ctx.attemptModel };
  }

  /** undici turns a throw from here into an 'error' event nobody listens to (a crash): never throw. */
  onResponseError(_c: Controller, error: Error): void {
    try {
      this.failed(error);
    } catch (err) {
      this.ctx.res.destroy();
      this.settle({ relayed: false, error: new StepFailed(err), sent: this.sent, answered: this.answered });
    }
  }

  private failed(error: Error): void {
    const ctx = this.ctx;
    if (this.settled) return;
    if (error instanceof ClientGone || ctx.res.destroyed) {
      ctx.error = error;
      this.settle(RELAYED);
    } else if (this.open && (error instanceof AttemptFailed || error instanceof BudgetSpent)) {
      // Our own abort (a deadline, a bad event before content): the kernel reads it as it is.
      this.settle({ relayed: false, error, sent: this.sent, answered: this.answered });
    } else if (this.held && !(error instanceof StepFailed) && this.ctl.canRetry()) {
      // A stream that broke before its first content: nothing reached the client, another
      // candidate may answer.
      this.settle({ relayed: false, error: new AttemptFailed(`stream_broken (${brokenReason(error, this.ep.timeouts.idleMs)})`), sent: true, answered: true });
    } else if (error instanceof StepFailed || this.open) {
      // Nothing reached the client: the kernel fails over or answers with an error.
      this.settle({ relayed: false, error, sent: this.sent, answered: this.answered });
    } else {
      // The head already reached the client: no retry, no splice; end its stream saying why.
      ctx.error = error;
      const reason = brokenReason(error, this.ep.timeouts.idleMs);
      const plan = this.plan;
      if (plan.kind === 'stream') endAndClose(ctx, plan.fail(`endpoint ${this.ep.name} ${reason}; the reply is incomplete`));
      else endBroken(ctx, this.headers, this.lastChunk, reason);
      this.settle(RELAYED);
    }
  }
}
