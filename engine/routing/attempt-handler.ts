// One attempt as undici's dispatch handler, whatever its reply becomes (relay.ts): it settles
// exactly once — counting its upstream time, giving back the endpoint's stream count, no longer
// listening to the client — cancels the upstream request when the client goes away, keeps one
// timer for its next deadline, and writes to the client with backpressure.
import type { Dispatcher } from 'undici';
import type { Endpoint, UnderWay } from '../backends/endpoints.js';
import { ClientGone, StepFailed } from '../backends/failures.js';
import type { ReplyHeaders } from '../core/json.js';
import type { AttemptState } from './attempt-state.js';
import type { AttemptControl, Outcome } from './attempt.js';
import { Deadline } from './deadline.js';
import type { Exchange } from './exchange.js';

export type Controller = Dispatcher.DispatchController;

export abstract class AttemptHandler<C extends Exchange> implements UnderWay {
  protected controller: Controller | null = null;
  protected settled = false;
  protected readonly sentAt = performance.now();
  private sent = false;
  protected status = 0;
  protected headers: ReplyHeaders = {};
  /** The endpoint whose active-stream count this reply holds, while it streams. */
  private streaming: Endpoint | null = null;
  /** The next deadline (first content, the budget); made when one is first needed. */
  private deadline: Deadline | null = null;
  /** A deadline passed before the request started: it is aborted when it does. */
  private abortWith: Error | null = null;
  private readonly onClientClose = () => {
    if (!this.ex.res.writableFinished) this.controller?.abort(new ClientGone());
  };

  constructor(
    protected readonly ex: C,
    protected readonly rec: AttemptState,
    protected readonly ep: Endpoint,
    protected readonly ctl: AttemptControl,
    private readonly resolve: (o: Outcome) => void,
  ) {
    ex.res.once('close', this.onClientClose);
    ep.underWay.add(this);
  }

  /** The next deadline is due. */
  protected abstract onDeadline(): void;

  /** Its endpoint was found down (Endpoint.foundDown). */
  abstract endpointDown(reason: string): void;

  /** Set the next deadline of this attempt (first content, the budget), when it falls before the
   *  endpoint's own reply timeout would (that one is undici's; within 1 % of it too). */
  protected arm(at: number, always = false): void {
    const ms = at - performance.now();
    if ((!always && !(ms < this.ep.timeouts.responseMs * 0.99)) || !(ms < Infinity)) return;
    this.deadline ??= new Deadline(
      () => this.onDeadline(),
      (err) => this.abort(err instanceof StepFailed ? err : new StepFailed(err)),
    );
    this.deadline.set(at);
  }

  /** When the last deadline set is (or was) due; 0: none was set. */
  protected get deadlineAt(): number {
    return this.deadline?.at ?? 0;
  }

  protected get deadlineArmed(): boolean {
    return this.deadline?.armed === true;
  }

  /** Give the attempt up: now, or as soon as undici hands over its controller (still connecting). */
  protected abort(reason: Error): void {
    if (this.controller) this.controller.abort(reason);
    else this.abortWith = reason;
  }

  /** Settle as failed before any byte reached the client. */
  protected fail(error: Error): void {
    this.settle({ relayed: false, error, sent: this.sent, answered: this.status !== 0 });
  }

  protected settle(o: Outcome): void {
    if (this.settled) return;
    this.settled = true;
    this.deadline?.clear();
    // Here, not after the await: the done hook may run before the loop resumes.
    this.rec.upstreamMs += performance.now() - this.sentAt;
    if (this.streaming) this.streaming.streams--;
    this.ep.underWay.delete(this);
    this.ex.res.off('close', this.onClientClose);
    this.resolve(o);
  }

  onRequestStart(controller: Controller): void {
    this.controller = controller;
    this.sent = true;
    if (this.abortWith) controller.abort(this.abortWith);
    else if (this.ex.res.destroyed) controller.abort(new ClientGone());
  }

  /** The reply streams to the client: counted on its endpoint while it lasts. */
  protected countStream(): void {
    if (this.streaming) return;
    this.ep.streams++;
    this.streaming = this.ep;
  }

  protected write(controller: Controller, out: Buffer | string): void {
    if (this.rec.firstChunkMs === 0) this.rec.firstChunkMs = this.ex.elapsedMs();
    if (!this.ex.res.write(out)) {
      controller.pause();
      this.ex.res.once('drain', () => controller.resume());
    }
  }

  /** Run a step of ours; what it throws aborts the attempt as a gateway fault, not the endpoint's. */
  protected guarded(controller: Controller, step: () => void): boolean {
    try {
      step();
      return true;
    } catch (err) {
      controller.abort(err instanceof StepFailed ? err : new StepFailed(err));
      return false;
    }
  }
}
