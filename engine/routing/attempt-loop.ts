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
// - a failure status, a stream that failed before its first content, a first-token deadline, a
//   context-length error when a larger context waits among the fallbacks: the next candidate on
//   a step with retry settings.
// Limits: 1 + max_retries attempts, the request's budget, and the fleet's retry budget for every
// attempt that adds load to a failing backend (decisions.ts, chargesFleet). When every attempt
// failed, the client gets the last backend answer held back (a fallback's client error never
// replaces the primary's failure), else the gateway's error. A stream that breaks after its
// content reached the client is continued by the next candidates that can (continuation.ts): the
// walk starts again over them, each attempt's events spliced into the client's stream; when none
// can, the stream ends with its in-stream error. An endpoint with a concurrency limit
// admits the attempt first (free slot or FIFO wait; a full queue sends the request on); one with
// a requests-per-minute limit takes a token first (without one it is skipped).
import { setTimeout as sleep } from 'node:timers/promises';
import type { Dispatcher } from 'undici';
import type { Endpoint } from '../backends/endpoints.js';
import { BreakerOpen, ClientGone, connectionFailure, errorCode, StepFailed, unsendable } from '../backends/failures.js';
import { parseDuration } from '../core/duration.js';
import { gwError } from '../core/errors.js';
import type { EndpointQueue, Turn } from '../backends/queue.js';
import { waitForSlot } from './admission.js';
import { AttemptFailed, BudgetSpent, type AttemptControl, type Broken, type HeldReply, type Outcome, type RetryableKind } from './attempt.js';
import { AttemptState, type FailedAttempt } from './attempt-state.js';
import { brokenReason } from './broken-stream.js';
import { AnswerSoFar, continuationOrder, type ContinuationApi, type Splice } from './continuation.js';
import { chargesFleet, exhaustedError, PlanWalk, retryDelay, type Exhaustion, type Failure, type Step } from './decisions.js';
import type { Exchange, SendPolicy } from './exchange.js';
import type { Candidate, RoutePlan } from './plan.js';
import { Relay } from './relay.js';
import { writeWhole } from './reply.js';
import type { StreamFormat, StreamShape } from './stream-watch.js';

const FIRST_TOKEN_HEADER = 'x-gw-first-token-timeout';
const NO_PLAN: RoutePlan = { candidates: [], fallbackFrom: 0, routing: null, requested: undefined };

/** Send the request along its route plan (see the top of this file); resolves once a reply was
 *  relayed, or throws the error the client should get. */
export function attemptLoop<C extends Exchange>(ex: C, policy: SendPolicy<C>, plan: RoutePlan = ex.plan ?? NO_PLAN): Promise<true> {
  return new AttemptRun(ex, policy, plan).run();
}

/** The answer the client gets if nothing better comes, with where it came from. */
interface Held extends HeldReply {
  fallback: boolean;
  /** Its entry in the attempt record's `tried`. */
  entry: number;
}

/** One request's walk through its plan: the request's attempt record (what steps read as
 *  ctx.attempt, one object for both) and the AttemptControl its attempts are told. */
class AttemptRun<C extends Exchange> extends AttemptState implements AttemptControl {
  // What the current attempt is told (AttemptControl; `model` is the record's).
  contextFallback = false;
  clientErrorsFail = false;
  firstTokenMs = 0;
  streams: StreamShape | null = null;
  readonly contextLengthError: ((text: string) => boolean) | null;
  readonly budgetEnds: number;
  splice: Splice | null = null;
  keepsAnswer = false;

  private walk: PlanWalk;
  private readonly x: Exhaustion = { failed: 0, skipped: 0, testAt: Infinity, full: null, limited: null, last: undefined, budgetSpent: false, unreachable: null };
  private held: Held | null = null;
  /** The last attempt's failure and endpoint (what the next attempt costs the fleet). */
  private previous: Failure | null = null;
  private previousEp: Endpoint | null = null;
  private safe = false;
  /** After a context-length error: only candidates with a larger window. */
  private minContext = 0;
  private streaming: boolean | undefined;
  private readonly firstTokenOverrideMs: number | undefined;
  /** The step being tried, and the jitter its retry would wait with (drawn once per step, so
   *  what canRetry promises a relay is what failed() then does). */
  private step: Step | null = null;
  private jitter = 0.5;
  /** Endpoints a failure status was retried on already: once per request each. */
  private statusRetried: Set<Endpoint> | null = null;
  /** The candidates walked now: the plan's, or after a break those that may continue it. */
  private candidates: readonly Candidate[];
  private fallbackFrom: number;
  /** Attempts made before this walk began (a continuation's walk has attempts of its own). */
  private phaseStart = 0;
  /** How this request's streams are continued (the API of the attempt under way), the answer
   *  relayed so far, and the break being continued. */
  private continuing: ContinuationApi | null = null;
  private answer: AnswerSoFar | null = null;
  private broken: Broken | null = null;
  /** The candidate under way (its index in `candidates`), and after a break the candidates that
   *  may continue it and the tried entry of the break. */
  private current: { c: Candidate; index: number } | null = null;
  private next: Candidate[] = [];
  private brokenEntry: { entry: number; endpoint: Endpoint; model: string | undefined } | null = null;

  constructor(private readonly ex: C, private readonly policy: SendPolicy<C>, private readonly plan: RoutePlan) {
    super();
    ex.track(this);
    this.walk = new PlanWalk(plan.candidates);
    this.candidates = plan.candidates;
    this.fallbackFrom = plan.fallbackFrom;
    this.budgetEnds = ex.start + (policy.retry?.budgetMs ?? Infinity);
    this.contextLengthError = policy.api?.contextLengthError ?? null;
    this.firstTokenOverrideMs = policy.retry ? firstTokenOverride(ex) : undefined;
  }

  canRetry(kind: RetryableKind): boolean {
    const retry = this.policy.retry;
    if (!this.safe || retry === undefined || this.count - this.phaseStart > this.policy.maxRetries || performance.now() >= this.budgetEnds || !retry.fleet.canRetry()) return false;
    if (this.walk.waiting) return true;
    return this.retryAfter({ kind, retryAfterMs: kind === 'status' ? this.pauseOf(this.endpoint!) : undefined }) !== null;
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
    if (this.safe && retry && this.count - this.phaseStart <= this.policy.maxRetries && performance.now() < this.budgetEnds && !retry.fleet.canRetry()) retry.fleet.exhausted++;
  }

  relayed(format: StreamFormat, bytes: Buffer): void {
    (this.answer ??= new AnswerSoFar(this.continuing!)).add(format, bytes);
  }

  mayContinue(): boolean {
    const api = this.continuing;
    const ep = this.endpoint!;
    if (!api || !this.answer || !this.safe || this.continued >= ep.failover.continuation.max || performance.now() >= this.budgetEnds || this.ex.res.destroyed) {
      // A continuation that broke in turn, with none left to it: the answer stays unfinished.
      if (this.broken) this.continuation = 'failed';
      return false;
    }
    const blocker = this.answer.fold().blocker();
    if (blocker !== null) {
      this.continuation = 'not_continuable';
      this.ex.log.warn({ req: this.ex.id, endpoint: ep.name }, `the stream broke and cannot be continued: ${blocker}`);
      return false;
    }
    const { c, index } = this.current!;
    this.next = continuationOrder(this.candidates, index, ep.failover.continuation.sameModelOnly)
      .map((i) => this.candidates[i])
      .filter((k) => !k.endpoint.retired && this.policy.continuation?.(this.ex, k.endpoint) === api);
    if (this.next.length > 0) return true;
    this.continuation = 'failed';
    this.ex.log.warn({ req: this.ex.id, endpoint: c.endpoint.name }, 'the stream broke after its content; no other candidate can continue it');
    return false;
  }

  spliced(): void {
    this.continuation = 'continued';
  }

  async run(): Promise<true> {
    try {
      return await this.walkPlan();
    } catch (err) {
      // A continuation's failure cannot become an error status: the stream ends saying why.
      if (!this.broken) throw err;
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
      if (queue && !queue.tryEnter()) {
        const turn = await this.waitTurn(ep, queue);
        if (turn === 'gone') return this.clientGone();
        if (turn !== 'admitted') continue;
      }
      const admittedAt = queue ? performance.now() : 0;
      let outcome: Outcome;
      try {
        outcome = await this.send(c, step.index);
      } finally {
        queue?.release(admittedAt);
      }
      if (outcome.relayed === 'broken') {
        this.continueOn(c, outcome);
        continue;
      }
      if (outcome.relayed) {
        if (ex.res.headersSent && ex.error && !(ex.error instanceof ClientGone)) ex.log.warn({ req: ex.id, endpoint: ep.name, err: ex.error }, 'the reply broke off after it had started');
        return true;
      }
      this.failed(c, step, outcome);
      // The prefill was refused: no other engine is asked to take it.
      if (this.broken && outcome.error instanceof AttemptFailed && outcome.error.kind === 'client_error') this.walk.stop();
    }
    return this.giveUp();
  }

  /** No slot free at once: a wait in the endpoint's queue (a full one sends the request on). */
  private async waitTurn(ep: Endpoint, queue: EndpointQueue): Promise<Turn | 'full'> {
    const waitFrom = performance.now();
    let turn: Turn | 'full' | undefined;
    try {
      turn = await waitForSlot(this, this.ex.res.destroyed, ep, queue);
    } finally {
      if (turn !== 'admitted') ep.rateGate?.refund();
    }
    this.queueMs += performance.now() - waitFrom;
    if (turn === 'full') (this.x.full ??= []).push(ep);
    return turn;
  }

  /** One attempt on candidate c: told what it must know, built, shaped and sent; settles with
   *  how it ended. */
  private send(c: Candidate, index: number): Promise<Outcome> {
    const { ex } = this;
    const ep = c.endpoint;
    this.endpoint = ep;
    this.model = c.model;
    this.current = { c, index };
    this.count++;
    this.prepare(c, index);
    const b = this.broken;
    this.splice = b && { format: b.format, plan: b.plan, headers: b.headers, reason: b.reason, transform: this.answer!.fold().splicer(), endHonestly: b.endHonestly };
    const up = b ? this.policy.continueRequest!(ex, ep, c.model, this.answer!.fold()) : this.policy.request(ex, ep, c.model);
    if (typeof up === 'string') {
      this.continuation = 'not_continuable';
      ex.log.warn({ req: ex.id }, `the stream broke and cannot be continued: ${up}`);
      return Promise.resolve({ relayed: false, error: new AttemptFailed(`not continuable (${up})`, 'client_error'), sent: false, answered: false });
    }
    ex.prepare(up);
    return new Promise((resolve) => {
      ep.dispatch({ path: up.path, method: up.method as Dispatcher.HttpMethod, headers: up.headers, body: up.body, replaySafe: this.safe, lastResort: c.why === 'last_resort' }, new Relay(ex, this, ep, this.policy, this, resolve));
    });
  }

  /** What this attempt is told, and the routing headers when a fallback model is tried. */
  private prepare(c: Candidate, index: number): void {
    const { ex, policy } = this;
    const ep = c.endpoint;
    const retry = policy.retry;
    const fallback = index >= this.fallbackFrom;
    this.streams = policy.api && (policy.watched === undefined || policy.watched(ex, ep)) ? policy.api.streams : null;
    // A stream that may be continued keeps what it relays (the API stays that of the break).
    const cs = ep.failover.continuation;
    if (!this.broken) this.continuing = this.safe && cs.enabled && cs.max > 0 && this.streams !== null ? policy.continuation?.(ex, ep) ?? null : null;
    this.keepsAnswer = this.continuing !== null && this.continued < cs.max;
    if (retry) {
      this.contextFallback = !fallback && this.fallbackFrom < this.candidates.length && this.largerContextAhead(c, index);
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
    if (fallback) this.markFallback();
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
      if (error.held && !(error.kind === 'client_error' && this.held)) this.held = { ...error.held, fallback: index >= this.fallbackFrom, entry: this.tried?.length ?? 0 };
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
      if (error instanceof StepFailed) throw error.failure;
      if (unsendable(error)) throw gwError('BAD_REQUEST', { reason: `the request cannot be forwarded as it is: ${error.message}` });
      if (answered) throw afterHead(ep, error);
      const code = errorCode(error) ?? error.message;
      // Before the request went out anything is a connection failure (a TLS error too).
      const what = connectionFailure(error) ?? (sent ? undefined : `connect failed (${code})`);
      if (!what) throw gwError('UPSTREAM_ERROR', { endpoint: ep.name, reason: code });
      if (sent && !this.safe) {
        if (what === 'timeout') throw gwError('UPSTREAM_TIMEOUT', { endpoint: ep.name, timeout: ep.setting('response_timeout'), detail: 'not sent again: this route is not replay-safe (model management)' });
        throw gwError('UPSTREAM_ERROR', {
          endpoint: ep.name,
          reason: `connection ${what} after the backend may have read the ${ex.method} request; not sent again, so it never runs twice (model-management routes are not replay-safe)`,
        });
      }
      // Never reached the backend: its requests-per-minute token is given back.
      if (!sent) ep.rateGate?.refund();
      failure = { kind: !sent || what === 'refused' || what === 'unreachable' || what === 'connect timeout' ? 'connect' : what === 'timeout' ? 'timeout' : 'dropped' };
      if (failure.kind === 'connect') (x.unreachable ??= []).push(ep);
      said = what === 'timeout' ? `timeout (no reply head within ${ep.setting('response_timeout')})` : what;
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
    const { ex } = this;
    const next = this.next;
    ex.log.warn({ req: ex.id, endpoint: c.endpoint.name, reason: broken.reason, chars: this.answer!.fold().chars, next: next.map((k) => k.endpoint.name) }, 'the stream broke after its content; continuing it on the next candidate');
    this.brokenEntry = { entry: this.tried?.length ?? 0, endpoint: c.endpoint, model: c.model };
    this.recordFailure(c.endpoint, `stream_broken_midway (${broken.reason})`);
    this.broken = broken;
    this.continued++;
    this.candidates = next;
    this.walk = new PlanWalk(next);
    this.fallbackFrom = Infinity;
    this.phaseStart = this.count;
    this.held = null;
    this.previous = null;
    this.statusRetried = null;
    Object.assign(this.x, { failed: 0, skipped: 0, testAt: Infinity, full: null, limited: null, last: undefined, budgetSpent: false, unreachable: null });
  }

  /** No continuation came through: the client's stream ends with the break's in-stream error,
   *  which is the request's answer (from the endpoint that broke). */
  private endBroken(): true {
    const { ex } = this;
    this.continuation ??= 'failed';
    const b = this.brokenEntry!;
    this.endpoint = b.endpoint;
    this.model = b.model;
    this.tried![b.entry].answered = true;
    if (ex.res.destroyed) return this.clientGone();
    this.broken!.endHonestly();
    ex.log.warn({ req: ex.id, endpoint: b.endpoint.name, err: ex.error }, 'the reply broke off after it had started');
    return true;
  }

  /** Nothing answered: the answer held back, the step's own answer, or the error. */
  private giveUp(): true {
    const { ex, held } = this;
    if (this.broken) return this.endBroken();
    if (held) {
      // Every attempt failed: the last backend answer held back is the most honest reply.
      if (!held.fallback) this.fellBack = null;
      this.tried![held.entry].answered = true;
      this.endpoint = held.endpoint;
      this.model = held.model;
      writeWhole(ex.res, ex.method, held.plan, held.status, held.headers, held.body);
      return true;
    }
    // The request ends with the last attempt's failure: that entry is the answer, not a retry.
    const last = this.tried?.[this.tried.length - 1];
    if (last && this.endpoint?.name === last.endpoint) last.answered = true;
    const err = exhaustedError(this.x, ex.provider, this.count, this.policy.retry?.budgetMs ?? 0, Date.now());
    if (this.policy.unavailable && (err.key === 'ENDPOINT_UNAVAILABLE' || err.key === 'CIRCUIT_BREAKER')) {
      this.endpoint = null;
      return this.policy.unavailable(ex);
    }
    throw err;
  }

  /** A candidate passed over for its open breaker: counted, with when its next test goes. */
  private skipped(ep: Endpoint): void {
    this.x.skipped++;
    this.x.testAt = Math.min(this.x.testAt, ep.breaker.nextTestAt);
  }

  private clientGone(): true {
    this.ex.error = new ClientGone();
    return true;
  }

  private recordFailure(ep: Endpoint, outcome: string, clientError = false): void {
    const failed: FailedAttempt = { endpoint: ep.name, family: ep.family, model: this.model ?? this.ex.model, outcome };
    if (clientError) failed.clientError = true;
    (this.tried ??= []).push(failed);
  }

  private windowOf(c: Candidate): number {
    const name = c.model ?? this.ex.model;
    return (name && this.policy.retry?.contextWindow(c.endpoint, name)) || 0;
  }

  /** Does a candidate after this one serve its model with a larger context window? */
  private largerContextAhead(c: Candidate, index: number): boolean {
    const mine = this.windowOf(c);
    if (!mine) return false;
    const all = this.candidates;
    for (let j = index + 1; j < all.length; j++) if (this.windowOf(all[j]) > mine) return true;
    return false;
  }

  /** A fallback model is tried: the routing headers say so, and why. */
  private markFallback(): void {
    const first = this.tried?.[0];
    // The primary was not served at all: the plan said so already.
    if (!first && this.plan.routing?.decision === 'fallback') return;
    const primary = this.plan.requested ?? first?.model ?? 'the requested model';
    const why = first ? `${first.outcome} from ${first.endpoint}` : 'not served';
    this.fellBack = { strategy: this.plan.routing?.strategy ?? 'fallback', decision: 'fallback', reason: `model_fallback (${primary}: ${why})` };
  }
}

/** A reply that failed after its head arrived, while a buffer plan held it: the backend ran the
 *  request, so it is not sent again. The backend's failure (a code: reset, closed, idle) is the
 *  broken-reply error a piped reply ends with; one of ours (a reply over the plan's limit) is
 *  UPSTREAM_ERROR. */
function afterHead(ep: Endpoint, error: Error): Error {
  if (errorCode(error) === undefined) return gwError('UPSTREAM_ERROR', { endpoint: ep.name, reason: error.message });
  return gwError('UPSTREAM_STREAM_BROKEN', { endpoint: ep.name, reason: brokenReason(error, ep) });
}

/** The per-request first-token deadline (X-Gw-First-Token-Timeout), or undefined. */
function firstTokenOverride(ex: Exchange): number | undefined {
  const value = ex.header(FIRST_TOKEN_HEADER);
  if (value === undefined) return undefined;
  try {
    return parseDuration(value.trim());
  } catch {
    throw gwError('BAD_REQUEST', { reason: `the ${FIRST_TOKEN_HEADER} header must be a duration such as 10s or 500ms` });
  }
}

/** Wait `ms`; false when the client went away meanwhile (the wait ends at once). */
async function pause(ex: Exchange, ms: number): Promise<boolean> {
  if (ex.res.destroyed) return false;
  const gone = new AbortController();
  const onClose = () => gone.abort();
  ex.res.once('close', onClose);
  try {
    await sleep(ms, undefined, { signal: gone.signal });
  } catch {
    // aborted: the client left
  } finally {
    ex.res.off('close', onClose);
  }
  return !ex.res.destroyed;
}
