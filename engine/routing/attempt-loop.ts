// The attempt loop: one request, its route plan, and the attempts it takes to get an answer. The
// candidates are tried in the plan's order (decisions.ts, PlanWalk: the requested model's
// endpoints, a retry round for the failures another try may fix, then each fallback model's).
// Each attempt is built by the terminal step's policy, shaped by the route's upstream hook, sent
// through the endpoint's send path and relayed by relay.ts. While no byte reached the client, a
// failed attempt is followed by the next one:
// - nothing went out (refused, connect timeout, unreachable, TLS): the next endpoint, always;
// - an open breaker: the endpoint is skipped (nothing sent); every candidate skipped so is
//   503 circuit_breaker with the time to the next test request as Retry-After;
// - reset, closed or no reply head in time after the request went out: the next endpoint on a
//   replay-safe route; 502 or 504 otherwise — a request that is not replay-safe never runs twice;
// - its endpoint found down meanwhile (Endpoint.foundDown): no reply head yet, the next endpoint
//   on a replay-safe route when one waits; a stream there that stays silent, continued;
// - a failure status, a stream that failed before its first content, a first-token deadline, a
//   context-length error when a larger context waits among the fallbacks: the next candidate on
//   a step with retry settings.
// Limits: 1 + max_retries attempts, the request's budget, and the fleet's retry budget for every
// attempt that adds load to a failing backend (decisions.ts, chargesFleet). When every attempt
// failed, the client gets the last backend answer held back (a fallback's client error never
// replaces the primary's failure), else the gateway's error. A stream that breaks after its
// content reached the client is continued by the candidates that can (continuation.ts): a new
// walk over them, each attempt spliced into the client's stream; none can: its in-stream error.
// Admission (a concurrency slot, a requests-per-minute token) comes first: admission.ts.
import type { Dispatcher } from 'undici';
import type { Endpoint } from '../backends/endpoints.js';
import { BreakerOpen, ClientGone } from '../backends/failures.js';
import { leaveDown, pause, waitForSlot } from './admission.js';
import { AttemptFailed, BudgetSpent, type AnswerKeeper, type AttemptControl, type Broken, type Outcome, type RetryableKind } from './attempt.js';
import { AttemptRecord, freshExhaustion } from './attempt-record.js';
import { Continuations, type ContinuationApi, type ContinuationHost, type Splice } from './continuation.js';
import { firstTokenOverride } from './deadline.js';
import {
  chargesFleet,
  connectionOutcome,
  fallbackRouting,
  largerContextAhead,
  PlanWalk,
  refusedPrefill,
  retryDelay,
  learnedFirstToken,
  type Failure,
  type Step,
} from './decisions.js';
import type { Exchange, SendPolicy } from './exchange.js';
import type { Candidate, RoutePlan } from './plan.js';
import { Relay } from './relay.js';
import type { StreamShape } from './stream-watch.js';
import type { UsageShape } from './usage.js';

const NO_PLAN: RoutePlan = { candidates: [], fallbackFrom: 0, routing: null, requested: undefined };

/** Send the request along its route plan (see the top of this file); resolves once a reply was
 *  relayed, or throws the error the client should get. */
export function attemptLoop<C extends Exchange>(ex: C, policy: SendPolicy<C>, plan: RoutePlan = ex.plan ?? NO_PLAN): Promise<true> {
  return new AttemptRun(ex, policy, plan).run();
}

/** One request's walk through its plan: the request's attempt record (what steps read as
 *  ctx.attempt, one object for both) and the AttemptControl its attempts are told. */
class AttemptRun<C extends Exchange> extends AttemptRecord<C> implements AttemptControl, ContinuationHost {
  // What the current attempt is told (AttemptControl; `model` is the record's).
  contextFallback = false;
  clientErrorsFail = false;
  firstTokenMs = 0;
  learnedFirstTokenMs = 0;
  streams: StreamShape | null = null;
  readonly contextLengthError: ((text: string) => boolean) | null;
  usageFields: UsageShape | null = null;
  sentBytes = 0;
  readonly budgetEnds: number;
  splice: Splice | null = null;
  answer: AnswerKeeper | null = null;

  private walk: PlanWalk;
  /** The last attempt's failure and endpoint (what the next attempt costs the fleet). */
  private previous: Failure | null = null;
  private previousEp: Endpoint | null = null;
  private safe = false;
  /** After a context-length error: only candidates with a larger window. */
  private minContext = 0;
  private streaming: boolean | undefined;
  private readonly firstTokenOverrideMs: number | undefined;
  /** The attempt under way asks for a broken answer again from its start (its engine refuses a prefill). */
  private restarting = false;
  /** The step being tried, and the jitter its retry would wait with (drawn once per step, so
   *  what canRetry promises a relay is what failed() then does). */
  private step: Step | null = null;
  private jitter = 0.5;
  /** Endpoints a failure status was retried on already: once per request each. */
  private statusRetried: Set<Endpoint> | null = null;
  /** The candidates walked now: the plan's, or after a break those that may continue it. */
  candidates: readonly Candidate[];
  private fallbackFrom: number;
  /** Attempts made before this walk began (a continuation's walk has attempts of its own). */
  private phaseStart = 0;
  /** How a stream that breaks after its content is continued (continuation.ts). */
  protected readonly continuations: Continuations;
  /** The index in `candidates` of the attempt under way. */
  current = 0;

  constructor(
    ex: C,
    policy: SendPolicy<C>,
    private readonly plan: RoutePlan,
  ) {
    super(ex, policy);
    ex.track(this);
    this.walk = new PlanWalk(plan.candidates);
    this.candidates = plan.candidates;
    this.fallbackFrom = plan.fallbackFrom;
    this.continuations = new Continuations(this, this, ex.log, ex.id);
    this.budgetEnds = ex.start + (policy.retry?.budgetMs ?? Infinity);
    this.contextLengthError = policy.api?.contextLengthError ?? null;
    this.firstTokenOverrideMs = policy.retry ? firstTokenOverride(ex) : undefined;
  }

  canRetry(kind: RetryableKind): boolean {
    const retry = this.policy.retry;
    if (
      !this.safe ||
      retry === undefined ||
      this.count - this.phaseStart > this.policy.maxRetries ||
      performance.now() >= this.budgetEnds ||
      !retry.fleet.canRetry()
    )
      return false;
    if (this.walk.waiting) return true;
    return this.retryAfter({ kind, retryAfterMs: kind === 'status' ? this.pauseOf(this.endpoint!) : undefined }) !== null;
  }

  streamingRequest(): boolean {
    return (this.streaming ??= this.policy.streaming?.(this.ex) === true);
  }

  mayMoveOn(fleet = false): boolean {
    const moves = this.safe && this.walk.waiting && this.count - this.phaseStart <= this.policy.maxRetries && performance.now() < this.budgetEnds;
    return moves && (!fleet || this.policy.retry?.fleet.canRetry() !== false);
  }

  /** Milliseconds after which the current step's candidate is tried again, or null: not again
   *  (decisions.ts, retryDelay), nor twice for a failure status on one endpoint. */
  private retryAfter(f: Failure): number | null {
    const step = this.step!;
    if (!this.walk.mayRetry(step) || (f.kind === 'status' && this.statusRetried?.has(this.endpoint!))) return null;
    return retryDelay(f, step.tries + 1, this.policy.retry!.backoffMs, this.budgetEnds - performance.now(), this.jitter);
  }

  /** What is left of the pause the endpoint asked for (its last 429 or 503 with Retry-After). */
  private pauseOf(ep: Endpoint): number {
    return Math.max(0, ep.coolingUntil - performance.now());
  }

  passedOn(): void {
    const retry = this.policy.retry;
    if (this.safe && retry && this.count - this.phaseStart <= this.policy.maxRetries && performance.now() < this.budgetEnds && !retry.fleet.canRetry())
      retry.fleet.exhausted++;
  }

  continuationAllowed(): boolean {
    return this.safe && performance.now() < this.budgetEnds && !this.ex.res.destroyed;
  }

  continuationApi(ep: Endpoint): ContinuationApi | null {
    return this.policy.continuation?.(this.ex, ep) ?? null;
  }

  async run(): Promise<true> {
    try {
      return await this.walkPlan();
    } catch (err) {
      // A continuation's failure cannot become an error status: the stream ends saying why.
      if (!this.continuations.broken) throw err;
      this.ex.log.warn({ req: this.ex.id, err }, 'the continuation failed');
      return this.endBroken();
    }
  }

  private async walkPlan(): Promise<true> {
    const { ex, policy } = this;
    const retry = policy.retry;
    // A request sent upstream earns the fleet its share of a retry (one answered without a backend does not).
    if (this.plan.candidates.length > 0) retry?.fleet.deposit();
    for (let step = this.walk.next(); step; step = this.walk.next()) {
      if (this.count - this.phaseStart > policy.maxRetries) break;
      const c = this.candidates[step.index];
      const ep = c.endpoint;
      // Removed by a reload since the plan was made: it takes no new requests.
      if (ep.retired) continue;
      if (this.minContext > 0 && this.windowOf(c) <= this.minContext) continue;
      if (step.tries > 0) {
        // A retry: after its backoff or the backend's Retry-After, if the budget lasts that long.
        if (step.readyAt >= this.budgetEnds) continue;
        const wait = step.readyAt - performance.now();
        if (wait > 0 && !(await pause(ex, wait))) return this.clientGone();
      }
      // An open breaker turns the candidate away before anything is built or charged (a last resort: breaker.ts).
      if (c.why === 'last_resort' ? !ep.breaker.lastResortReady : !ep.breaker.admits) {
        this.skipped(ep);
        continue;
      }
      if (this.count > 0 && retry) {
        // The request's budget spent (a deadline may fire a hair early): no further attempt.
        if (performance.now() >= this.budgetEnds) {
          this.x.budgetSpent = true;
          break;
        }
        if (chargesFleet(this.previous, ep === this.previousEp, step.tries > 0) && !retry.fleet.tryRetry()) {
          ex.log.warn({ req: ex.id }, 'the fleet retry budget (proxy.retry.fleet) is spent: no further attempt');
          break;
        }
      }
      this.step = step;
      this.jitter = Math.random();
      // Admission: a requests-per-minute token; a concurrency slot, at once or after a wait.
      const gate = ep.rateGate;
      if (gate && !gate.tryTake()) {
        (this.x.limited ??= []).push(ep);
        continue;
      }
      // Decided before any slot is taken: a policy that throws leaves no slot held.
      this.safe = policy.replaySafe(ex, ep);
      const queue = ep.queue !== null && (policy.queued === undefined || policy.queued(ex, ep)) ? ep.queue : null;
      // The model it asks for: an engine that holds few models at once serves its queue by model.
      const model = c.model ?? ex.model ?? '';
      if (queue && !queue.tryEnter(model)) {
        const turn = await waitForSlot(this, ex.res.destroyed, ep, queue, model);
        if (turn === 'full') (this.x.full ??= []).push(ep);
        if (turn === 'gone') return this.clientGone();
        if (turn !== 'admitted') continue;
        if (!ep.routable && this.mayMoveOn()) {
          leaveDown(ex, ep, queue, model);
          continue;
        }
      }
      const admittedAt = queue ? performance.now() : 0;
      let outcome: Outcome | undefined;
      try {
        outcome = await this.send(c, step.index);
      } finally {
        queue?.release(admittedAt, model, outcome !== undefined && outcome.relayed !== false);
      }
      if (outcome.relayed === 'broken') {
        this.continueOn(c, outcome);
        continue;
      }
      if (outcome.relayed) {
        // A continuation that never joined (its client left first): the broken stream's answer.
        if (this.continuations.broken && this.continuation !== 'continued') return this.endBroken();
        if (ex.res.headersSent && ex.error && !(ex.error instanceof ClientGone))
          ex.log.warn({ req: ex.id, endpoint: ep.name, err: ex.error }, 'the reply broke off after it had started');
        return true;
      }
      this.failed(c, step, outcome);
      const error = outcome.error;
      if (this.continuations.broken && error instanceof AttemptFailed && error.kind === 'client_error') {
        // A prefill refused: remembered for the endpoint and model, and the answer asked for there
        // again from its start. Anything else (a restart that differs, a request that cannot be
        // continued): the stream's honest end, no other engine asked.
        if (!this.restarting && refusedPrefill(error)) {
          this.continuations.refusedPrefill(c.endpoint, c.model ?? ex.model);
          this.walk.retryLater(step, performance.now());
        } else this.walk.stop();
      }
    }
    return this.giveUp();
  }

  /** One attempt on candidate c: told what it must know, built, shaped and sent; settles with
   *  how it ended. */
  private send(c: Candidate, index: number): Promise<Outcome> {
    const { ex } = this;
    const ep = c.endpoint;
    this.endpoint = ep;
    this.model = c.model;
    this.current = index;
    this.count++;
    this.prepare(c, index);
    const k = this.continuations;
    // An engine that refused a prefill of this model is asked for the answer again from its start.
    this.restarting = k.broken !== null && k.restartsOn(ep, c.model ?? ex.model);
    const up = k.broken && !this.restarting ? this.policy.continueRequest!(ex, ep, c.model, k.transcript) : this.policy.request(ex, ep, c.model);
    if (typeof up === 'string') {
      k.refused(up);
      return Promise.resolve({ relayed: false, error: new AttemptFailed(`not continuable (${up})`, 'client_error'), sent: false, answered: false });
    }
    // After the request: it says what the continuation was sent (an engine may repeat it).
    this.splice = k.broken && k.splice(this.restarting);
    // A fallback model finishing the answer is a fallback answer.
    if (k.broken && c.group > 0) this.fellBack = fallbackRouting(this.plan, this.tried?.[0]) ?? this.fellBack;
    ex.prepare(up);
    this.sentBytes = up.body?.length ?? 0;
    const retry = this.firstTokenMs === 0 && this.firstTokenOverrideMs === undefined && this.safe && this.streams !== null && !k.broken && this.policy.retry;
    this.learnedFirstTokenMs = retry ? learnedFirstToken(this.candidates, index, c.model ?? ex.model, this.sentBytes, retry.cold) : 0;
    return new Promise((resolve) => {
      ep.dispatch(
        {
          path: up.path,
          method: up.method as Dispatcher.HttpMethod,
          headers: up.headers,
          body: up.body,
          replaySafe: this.safe,
          lastResort: c.why === 'last_resort',
        },
        new Relay(ex, this, ep, this.policy, this, resolve),
      );
    });
  }

  /** What this attempt is told, and the routing headers when a fallback model is tried. */
  private prepare(c: Candidate, index: number): void {
    const { ex, policy } = this;
    const ep = c.endpoint;
    const retry = policy.retry;
    const fallback = index >= this.fallbackFrom;
    this.streams = policy.api && (policy.watched === undefined || policy.watched(ex, ep)) ? policy.api.streams : null;
    // Tokens are counted on the inference routes (those whose streams are watched), not on a pull's.
    this.usageFields = ex.countsUsage && this.streams !== null ? (policy.api!.usage ?? null) : null;
    // A stream that may be continued keeps what it relays.
    this.answer = this.continuations.prepare(ep, this.safe && this.streams !== null);
    if (retry) {
      this.contextFallback = !fallback && this.fallbackFrom < this.candidates.length && largerContextAhead(this.candidates, index, (k) => this.windowOf(k));
      this.clientErrorsFail = fallback && this.held !== null;
      this.firstTokenMs = 0;
      const f = ep.failover;
      if (this.safe && (this.firstTokenOverrideMs ?? f.coldFirstTokenMs) > 0 && (this.streaming ??= policy.streaming?.(ex) === true)) {
        // Cold loads are not stalls: a model the endpoint reports not loaded gets the longer deadline.
        const name = c.model ?? ex.model;
        this.firstTokenMs = this.firstTokenOverrideMs ?? (name !== undefined && retry.cold(ep, name) ? f.coldFirstTokenMs : f.firstTokenMs);
      }
    }
    // Said before the attempt: its reply head carries the routing headers.
    if (fallback) this.fellBack = fallbackRouting(this.plan, this.tried?.[0]) ?? this.fellBack;
  }

  /** An attempt failed before any byte reached the client: record it and say what may follow. */
  private failed(c: Candidate, step: Step, outcome: Extract<Outcome, { relayed: false }>): void {
    const index = step.index;
    const { ex, policy, x } = this;
    const ep = c.endpoint;
    const { error, sent, answered } = outcome;
    let failure: Failure;
    let said: string;
    let clientError = false;
    if (error instanceof AttemptFailed) {
      clientError = error.held !== null && error.held.status < 500 && error.held.status !== 429;
      failure = { kind: error.kind, retryAfterMs: error.kind === 'status' ? this.pauseOf(ep) : undefined };
      said = error.outcome;
      // A fallback's client error never replaces the primary's failure as the answer.
      if (error.held && !(error.kind === 'client_error' && this.held))
        this.held = { ...error.held, fallback: index >= this.fallbackFrom, entry: this.tried?.length ?? 0 };
      if (error.kind === 'context_length') this.minContext = this.windowOf(c) || 1;
    } else if (error instanceof BudgetSpent) {
      this.recordFailure(ep, 'budget_spent');
      x.budgetSpent = true;
      this.walk.stop();
      return;
    } else if (error instanceof BreakerOpen) {
      // Its test request went out with another request meanwhile: nothing was sent, not an
      // attempt; the endpoint's token is given back.
      ep.rateGate?.refund();
      this.count--;
      this.endpoint = this.previousEp;
      this.skipped(ep);
      return;
    } else {
      ({ failure, said } = connectionOutcome(error, sent, answered, this.safe, ep, ex.method));
      // Never reached the backend: its requests-per-minute token is given back.
      if (!sent) ep.rateGate?.refund();
      if (failure.kind === 'connect') (x.unreachable ??= []).push(ep);
    }
    x.failed++;
    x.last = said;
    this.previous = failure;
    this.previousEp = ep;
    this.recordFailure(ep, said, clientError);
    if (policy.retry) {
      const delay = this.retryAfter(failure);
      if (delay !== null) {
        this.walk.retryLater(step, performance.now() + delay);
        if (failure.kind === 'status') (this.statusRetried ??= new Set()).add(ep);
      }
    }
    ex.log.warn({ req: ex.id, endpoint: ep.name, model: c.model, candidate: c.why, failure: said }, 'attempt failed; trying the next candidate');
  }

  /** The stream broke on candidate c after its content reached the client, and candidates that
   *  may continue it wait (mayContinue): the walk starts again over them. */
  private continueOn(c: Candidate, broken: Broken): void {
    const next = this.continuations.begin(c, broken, this.tried?.length ?? 0);
    this.recordFailure(c.endpoint, `stream_broken_midway (${broken.reason})`);
    this.candidates = next;
    this.walk = new PlanWalk(next);
    this.fallbackFrom = Infinity;
    this.phaseStart = this.count;
    this.held = null;
    this.previous = null;
    this.statusRetried = null;
    this.x = freshExhaustion();
  }
}
