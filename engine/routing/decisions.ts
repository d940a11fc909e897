// The attempt loop's decisions, as small pure functions and one cursor over the route plan, each
// testable alone (test/engine/routing/decisions.test.ts):
// - the order (PlanWalk): the names of the plan in turn (the requested model, then each
//   fallback); within one name, each of its endpoints once, then — soonest ready first — those
//   whose failure another try may fix once more; only then the next name. The last name's
//   endpoints may be tried again while the attempts last;
// - which failures another try may fix, and after how long (retryDelay): a failure status once
//   more, after the backend's Retry-After or a backoff; a dropped connection or a stream that
//   failed before its first content while the attempts last;
// - which further attempts the fleet's retry budget must allow (chargesFleet): those that add load
//   to a backend that failed, never the failover to another endpoint after a connection failure;
// - what a connection-level failure means for the request (connectionOutcome): another try, or
//   the error the client gets at once;
// - what the client is told when nothing answered (exhaustedError).
import type { Endpoint } from '../backends/endpoints.js';
import { connectionFailure, errorCode, StepFailed, unsendable } from '../backends/failures.js';
import { brokenReason } from './broken-stream.js';
import { formatDuration } from '../core/duration.js';
import { gwError, type GatewayError } from '../core/errors.js';
import { endpointsRateLimited, queueFull, type Whom } from './admission.js';
import { AttemptFailed } from './attempt.js';
import type { FailedAttempt } from './attempt-state.js';
import type { Candidate, RoutePlan, RoutingInfo } from './plan.js';

/** How an attempt failed, as far as what happens next depends on it. */
export type FailureKind =
  /** Nothing went out: refused, unreachable, connect timeout, TLS. */
  | 'connect'
  /** The connection died after the request went out, with no reply: reset, closed. */
  | 'dropped'
  /** No reply head within the reply timeout. */
  | 'timeout'
  /** A status another candidate may do better than (the endpoint's retry statuses). */
  | 'status'
  /** A stream that failed before its first content: an error event, a malformed one, a break. */
  | 'stream'
  /** A stream's first content came too late. */
  | 'first_token'
  /** The prompt is longer than this endpoint's context window. */
  | 'context_length'
  /** A fallback model refused what the primary accepted. */
  | 'client_error'
  /** Given up without a reply head: the endpoint was found down meanwhile (endpoints.ts, foundDown). */
  | 'abandoned';

export interface Failure {
  kind: FailureKind;
  /** A status's Retry-After still to run (milliseconds), when the backend sent one. */
  retryAfterMs?: number;
}

/** The backoff before a candidate's next try: doubling with each try, full jitter in [½, 1½) so
 *  the retries of many requests spread out. */
export const backoff = (backoffMs: number, tries: number, random: number) => backoffMs * 2 ** Math.max(0, tries - 1) * (0.5 + random);

/** Milliseconds after which a candidate that failed may be tried again in its name's next retry
 *  round, or null when another try would not help. `tries`: how often it was tried, this one
 *  included. A failure status (429, 5xx) is tried once more at most, after the backend's
 *  Retry-After or the backoff (and once per endpoint in a request: the loop keeps count); a dropped connection or a stream that failed before its first
 *  content again while the attempts and the budget last. Never again: nothing reached it (it is
 *  down), it never answered in time (waiting again doubles the wait), or it gave its answer (a
 *  client or context-length error). A wait the budget cannot hold is none. */
export function retryDelay(f: Failure, tries: number, backoffMs: number, budgetLeftMs: number, random: number): number | null {
  let wait: number;
  switch (f.kind) {
    case 'status':
      if (tries > 1) return null;
      wait = f.retryAfterMs !== undefined && f.retryAfterMs > 0 ? f.retryAfterMs : backoff(backoffMs, tries, random);
      break;
    case 'dropped':
    case 'stream':
    case 'first_token':
      wait = backoff(backoffMs, tries, random);
      break;
    default:
      return null;
  }
  return wait < budgetLeftMs ? wait : null;
}

/** Does the next attempt take a token of the fleet's retry budget? Every attempt after a failure
 *  does — it adds load to backends that fail — except moving on to another endpoint after a
 *  connection-level failure (or its endpoint found down) before any reply: the request was not served, and a healthy endpoint
 *  must never be refused it. */
export function chargesFleet(previous: Failure | null, sameEndpoint: boolean, retryRound: boolean): boolean {
  if (previous === null) return false;
  if (retryRound || sameEndpoint) return true;
  return previous.kind !== 'connect' && previous.kind !== 'dropped' && previous.kind !== 'timeout' && previous.kind !== 'abandoned';
}

/** Is this status one another candidate may do better than, so the relay holds it back? The
 *  endpoint's retry statuses; a client error only when the loop says so (a fallback model's, or
 *  a context-length error while a larger context waits). */
export function holdsStatus(status: number, retryStatuses: ReadonlySet<number>, o: { contextFallback: boolean; clientErrorsFail: boolean }): boolean {
  if (retryStatuses.has(status)) return true;
  return status >= 400 && status < 500 && (o.contextFallback || o.clientErrorsFail);
}

/** What a held status becomes once read whole: a context-length error while a larger context
 *  waits; a client error that is the answer after all (it is not about the context, and no
 *  primary's failure is held); a fallback's client error; else a failure status. */
export function heldVerdict(
  status: number,
  retryStatuses: ReadonlySet<number>,
  o: { contextFallback: boolean; clientErrorsFail: boolean },
  isContextError: () => boolean,
): 'context_length' | 'answer' | 'client_error' | 'status' {
  if (status < 400 || status >= 500 || retryStatuses.has(status)) return 'status';
  if (o.contextFallback && isContextError()) return 'context_length';
  return o.clientErrorsFail ? 'client_error' : 'answer';
}

export interface Step {
  index: number;
  /** performance.now() time before which it must not go (a retry's backoff or Retry-After); 0: now. */
  readyAt: number;
  /** How often this candidate was tried before (0: its first try). */
  tries: number;
}

interface Retry {
  index: number;
  readyAt: number;
  tries: number;
}

/** The plan's candidates in the order they are tried (see the top of this file). */
export class PlanWalk {
  private end = 0;
  private pos = 0;
  /** The current name's retry round (soonest ready first) and how far it got; null: its first pass. */
  private round: Retry[] | null = null;
  private at = 0;
  /** The candidates to try in the round after this one (made when the first one fails). */
  private later: Retry[] | null = null;
  private stopped = false;

  constructor(private readonly candidates: readonly Candidate[]) {
    this.end = this.groupEnd(0);
  }

  private groupEnd(from: number): number {
    const c = this.candidates;
    let i = from;
    while (i < c.length && c[i].group === c[from].group) i++;
    return i;
  }

  /** The next candidate, or null when the plan is done. */
  next(): Step | null {
    if (this.stopped) return null;
    for (;;) {
      if (this.round === null && this.pos < this.end) return { index: this.pos++, readyAt: 0, tries: 0 };
      if (this.round !== null && this.at < this.round.length) return this.round[this.at++];
      if (this.later !== null && this.later.length > 0) {
        this.round = this.later.sort((a, b) => a.readyAt - b.readyAt);
        this.later = null;
        this.at = 0;
        continue;
      }
      // This name is done: the next one.
      if (this.end >= this.candidates.length) return null;
      this.round = null;
      this.pos = this.end;
      this.end = this.groupEnd(this.end);
    }
  }

  /** May the candidate of `step` be tried again, were it to fail? Once more before the next name
   *  is tried; the last name's, again and again. */
  mayRetry(step: Step): boolean {
    return step.tries === 0 || this.end >= this.candidates.length;
  }

  /** The candidate of `step`, which just failed, is tried again from `readyAt`, in its name's next
   *  retry round (if it may be: mayRetry). */
  retryLater(step: Step, readyAt: number): void {
    if (this.mayRetry(step)) (this.later ??= []).push({ index: step.index, readyAt, tries: step.tries + 1 });
  }

  /** No further candidate (the request's budget is spent). */
  stop(): void {
    this.stopped = true;
  }

  /** Is another candidate waiting (after the current one, in a retry round to come, in a later
   *  name)? Whether the current one itself would be tried again is retryDelay's to say. */
  get waiting(): boolean {
    if (this.stopped) return false;
    if (this.round === null ? this.pos < this.end : this.at < this.round.length) return true;
    return (this.later !== null && this.later.length > 0) || this.end < this.candidates.length;
  }
}

/** Does a candidate after `index` serve its model with a larger context window (`windowOf`: 0
 *  when unknown)? Then a context-length error is worth holding back. */
export function largerContextAhead(candidates: readonly Candidate[], index: number, windowOf: (c: Candidate) => number): boolean {
  const mine = windowOf(candidates[index]);
  if (!mine) return false;
  for (let j = index + 1; j < candidates.length; j++) if (windowOf(candidates[j]) > mine) return true;
  return false;
}

/** A first-token deadline for candidate `index` learned from its endpoint's recent streams of
 *  the model and prompts this size (backends/first-tokens.ts), when a stall there is worth
 *  leaving (warmAlternative); 0: none. It applies to a reply that is a stream (the relay knows
 *  at its head: the body is not read for it). */
export function learnedFirstToken(
  candidates: readonly Candidate[],
  index: number,
  model: string | undefined,
  promptBytes: number,
  cold: (ep: Endpoint, model: string) => boolean,
): number {
  if (model === undefined) return 0;
  const ms = candidates[index].endpoint.firstTokens.deadline(model, promptBytes);
  return ms > 0 && warmAlternative(candidates, index, model, cold) ? ms : 0;
}

/** Is a stall of candidate `index` worth leaving (a learned first-token deadline)? Its model is
 *  loaded there (a load is not a stall) and a candidate after it — another endpoint still
 *  configured, or another model of the same hosted service (a service serves its models apart;
 *  an engine's other model waits behind the stall) — has its model loaded (`cold`: the endpoint
 *  reports it not loaded). */
export function warmAlternative(candidates: readonly Candidate[], index: number, model: string, cold: (ep: Endpoint, model: string) => boolean): boolean {
  const here = candidates[index].endpoint;
  if (cold(here, model)) return false;
  for (let j = index + 1; j < candidates.length; j++) {
    const k = candidates[j];
    const name = k.model ?? model;
    const elsewhere = k.endpoint !== here || (name !== model && here.profile.characteristics.hosted_service);
    if (elsewhere && !k.endpoint.retired && !cold(k.endpoint, name)) return true;
  }
  return false;
}

/** How the routing headers say a fallback model is tried, and why; null when the plan said so
 *  already (the primary was not served at all). */
export function fallbackRouting(plan: RoutePlan, first: FailedAttempt | undefined): RoutingInfo | null {
  if (!first && plan.routing?.decision === 'fallback') return null;
  const primary = plan.requested ?? first?.model ?? 'the requested model';
  const why = first ? `${first.outcome} from ${first.endpoint}` : 'not served';
  return { strategy: plan.routing?.strategy ?? 'fallback', decision: 'fallback', reason: `model_fallback (${primary}: ${why})` };
}

/** A continuation's reply that is not a stream the client's can take: a 4xx refused the prefill
 *  (the answer is then asked for again there from its start: attempt-loop.ts), anything else is
 *  a failure the next candidate may not have. */
export function continuationFailure(status: number): AttemptFailed {
  const refused = status >= 400 && status < 500 && status !== 429;
  return new AttemptFailed(
    `continuation ${refused ? REFUSED : 'failed'} (${status}${status === 200 ? ', not a stream' : ''})`,
    refused ? 'client_error' : 'status',
  );
}

const REFUSED = 'refused';

/** Did the engine refuse the continuation's prefill as such (a 400 or 422 to it: a request it will
 *  not take; not a 404 of a model being reloaded, nor a 413 of a body too large)? */
export const refusedPrefill = (err: AttemptFailed): boolean =>
  err.kind === 'client_error' && (err.outcome.startsWith(`continuation ${REFUSED} (400`) || err.outcome.startsWith(`continuation ${REFUSED} (422`));

/** What the attempts came to when none answered. */
export interface Exhaustion {
  failed: number;
  /** Candidates skipped because their breaker was open, and when the soonest lets a test
   *  request through (epoch milliseconds; Infinity: none was skipped). */
  skipped: number;
  testAt: number;
  full: Endpoint[] | null;
  limited: Endpoint[] | null;
  /** The last failure, in words. */
  last: string | undefined;
  budgetSpent: boolean;
  /** Endpoints nothing could reach (refused, unreachable, connect timeout): named with where
   *  they listen, so the message says what to start. */
  unreachable?: Endpoint[] | null;
}

/** The error for a request nothing answered: its budget ran out (504); every candidate was busy
 *  (429); every one had an open breaker (503 circuit_breaker, Retry-After: the next test); else
 *  503 endpoint_unavailable naming what happened. */
export function exhaustedError(x: Exhaustion, who: Whom, attempts: number, budgetMs: number, now: number): GatewayError {
  if (x.budgetSpent) return gwError('BUDGET_EXCEEDED', { budget: formatDuration(budgetMs), attempts });
  if (x.full && x.failed === 0) return queueFull(who, x.full);
  if (x.limited && x.failed === 0) return endpointsRateLimited(who, x.limited);
  if (x.failed === 0 && x.skipped > 0) {
    const retryAfter = Number.isFinite(x.testAt) ? Math.max(1, Math.ceil((x.testAt - now) / 1000)) : 1;
    return gwError('CIRCUIT_BREAKER', { ...who, skipped: x.skipped, retryAfter }, ['retry-after', String(retryAfter)]);
  }
  const { failed } = x;
  const urls = x.unreachable ? [...new Set(x.unreachable.map((e) => e.url))] : null;
  return gwError('ENDPOINT_UNAVAILABLE', {
    ...who,
    reason: `${failed} endpoint${failed === 1 ? '' : 's'} failed${x.last ? ` (last: ${x.last})` : ''}, ${x.skipped} skipped for an open circuit breaker${x.full ? `, ${x.full.length} with a full queue` : ''}`,
    hint: urls ? `nothing answered at ${urls.join(', ')}: start the backend there, or correct the endpoint's url under discovery.static.endpoints` : undefined,
  });
}

/** An attempt that failed below the reply (nothing of one relayed): how, as a kind and in words
 *  — or, thrown, the error the client gets at once: a fault of ours, a request no backend can
 *  take, a reply whose head had arrived (the backend ran it), a connection lost after a request
 *  that is not replay-safe may have been read (never run twice). */
export function connectionOutcome(
  error: Error,
  sent: boolean,
  answered: boolean,
  safe: boolean,
  ep: Endpoint,
  method: string,
): { failure: Failure; said: string } {
  if (error instanceof StepFailed) throw error.failure;
  if (unsendable(error)) throw gwError('BAD_REQUEST', { reason: `the request cannot be forwarded as it is: ${error.message}` });
  if (answered) throw afterHead(ep, error);
  const code = errorCode(error) ?? error.message;
  // Before the request went out anything is a connection failure (a TLS error too).
  const what = connectionFailure(error) ?? (sent ? undefined : `connect failed (${code})`);
  if (!what) throw gwError('UPSTREAM_ERROR', { endpoint: ep.name, reason: code });
  if (sent && !safe) {
    if (what === 'timeout')
      throw gwError('UPSTREAM_TIMEOUT', {
        endpoint: ep.name,
        timeout: ep.setting('response_timeout'),
        detail: 'not sent again: this route is not replay-safe (model management)',
      });
    throw gwError('UPSTREAM_ERROR', {
      endpoint: ep.name,
      reason: `connection ${what} after the backend may have read the ${method} request; not sent again, so it never runs twice (model-management routes are not replay-safe)`,
    });
  }
  const kind = !sent || what === 'refused' || what === 'unreachable' || what === 'connect timeout' ? 'connect' : what === 'timeout' ? 'timeout' : 'dropped';
  return { failure: { kind }, said: what === 'timeout' ? `timeout (no reply head within ${ep.setting('response_timeout')})` : what };
}

/** A reply that failed after its head arrived, while a buffer plan held it: the backend ran the
 *  request, so it is not sent again. The backend's failure (a code: reset, closed, idle) is the
 *  broken-reply error a piped reply ends with; one of ours (a reply over the plan's limit) is
 *  UPSTREAM_ERROR. */
function afterHead(ep: Endpoint, error: Error): Error {
  if (errorCode(error) === undefined) return gwError('UPSTREAM_ERROR', { endpoint: ep.name, reason: error.message });
  return gwError('UPSTREAM_STREAM_BROKEN', { endpoint: ep.name, reason: brokenReason(error, ep) });
}
