// The one place requests are sent upstream. A terminal step hands the kernel a policy — how to
// build the request for an endpoint, whether it may be sent twice, how to shape the reply, and
// its retry settings — and the kernel tries the candidates in order (select-endpoint laid them
// out: the endpoints of the model, then those of each fallback model). Each attempt runs the
// `upstream` hook, goes through the endpoint's dispatch path (breaker, counts, health,
// stale-socket retry: backends/interceptors.ts) and is relayed by relay.ts. While no byte reached
// the client, a failed attempt is followed by the next one:
// - nothing went out (refused, connect timeout, unreachable, TLS, an open breaker): next endpoint;
// - reset, closed or no reply head in time after the request went out: the next endpoint on a
//   replay-safe route; 502 or 504 otherwise — a request that is not replay-safe never runs twice;
// - replay-safe routes with retry settings (SendPolicy.retry) also move on after a retry status
//   (429, 5xx: proxy.retry.on_statuses), a stream that failed before its first content, a first-
//   token deadline, a context-length error when a larger context waits in the fallback chain.
//   Those failures may be tried again on the same endpoint after a backoff (or its Retry-After,
//   once), within max_retries, the request's budget and the fleet's retry budget.
// When every attempt failed, the client gets the last backend answer held back (a fallback's
// client error never replaces the primary's failure), else the gateway's error. Once a backend's
// reply started to reach the client nothing is retried. An endpoint with a concurrency limit
// admits the attempt first (free slot or FIFO wait; a full queue sends the request on); one with
// a requests-per-minute limit takes a token first (without one it is skipped).
import { setTimeout as sleep } from 'node:timers/promises';
import type { Dispatcher } from 'undici';
import type { Endpoint } from '../backends/endpoints.js';
import { BreakerOpen, ClientGone, connectionFailure, errorCode, StepFailed, unsendable } from '../backends/failures.js';
import type { RetryBudget } from '../backends/retry-budget.js';
import { endpointsRateLimited, queueFull, waitForSlot } from './admission.js';
import { brokenReason } from './broken-stream.js';
import type { Context, UpstreamRequest } from './context.js';
import { formatDuration, parseDuration } from '../core/duration.js';
import { gwError } from '../core/errors.js';
import type { ReplyHeaders } from '../core/json.js';
import { AttemptFailed, BudgetSpent, Relay, relayWhole, type AttemptControl, type HeldReply, type Outcome, type ReplyPlan } from './relay.js';
import type { Runtime } from './runtime.js';

export { backendHeaders, type PipePlan, type ReplyPlan } from './relay.js';

/** How status failures are retried (proxy.retry), made once per terminal step: retrySettings(env). */
export interface RetrySettings {
  budgetMs: number;
  backoffMs: number;
  fleet: RetryBudget;
  /** The context window an endpoint serves a model with; undefined: unknown. */
  contextWindow(ep: Endpoint, model: string): number | undefined;
  /** The endpoint reports the model not loaded now: its first token may wait for a load. */
  cold(ep: Endpoint, model: string): boolean;
}

/** A terminal step's policy, made once when the step is applied (no allocation per request). */
export interface SendPolicy {
  /** Further attempts after the first. */
  maxRetries: number;
  /** Retries on statuses, budgets, first-token deadlines; absent: connection failover only. */
  retry?: RetrySettings;
  /** May the request go to the next endpoint after the backend may have read it? */
  replaySafe(ctx: Context, ep: Endpoint): boolean;
  /** When every candidate's breaker is open, send the request to the first as its test request
   *  (it has no other hope)? Absent: yes; false for a step that has an answer of its own. */
  lastResort?: boolean;
  /** Does this request take one of the endpoint's concurrency slots (its queue)? Absent: yes. */
  queued?(ctx: Context, ep: Endpoint): boolean;
  /** Does the request ask for a streamed reply (first_token_timeout applies)? Absent: no. Asked
   *  only when some deadline is set. */
  streaming?(ctx: Context): boolean;
  /** Does the request run a model on this endpoint, so that a streamed reply is watched (held
   *  until its first content, its terminator checked)? Absent: yes. A model pull's progress
   *  stream is not a generation. */
  watched?(ctx: Context, ep: Endpoint): boolean;
  /** The request for this endpoint (the kernel then runs the upstream hook on it). */
  request(ctx: Context, ep: Endpoint): UpstreamRequest;
  /** How the reply is shaped; absent, or undefined for this reply: piped as is. */
  reply?(ctx: Context, status: number, headers: ReplyHeaders): ReplyPlan | undefined;
}

export function retrySettings(env: Runtime): RetrySettings {
  const r = env.config.proxy.retry;
  const { catalogue } = env;
  return {
    budgetMs: parseDuration(r.budget),
    backoffMs: parseDuration(r.backoff),
    fleet: env.retries,
    contextWindow: (ep, model) => {
      const m = catalogue.find(model)?.value;
      return m ? m.servedAs.get(ep)?.context ?? m.contextWindow : undefined;
    },
    cold: (ep, model) => env.residency.isLoaded(ep, model) === false,
  };
}

const FIRST_TOKEN_HEADER = 'x-gw-first-token-timeout';

/** `lastResort`: the request has no other hope, so an open breaker lets it through as its test
 *  request (one at a time) instead of refusing for the whole open period. */
function attempt(ctx: Context, ep: Endpoint, policy: SendPolicy, replaySafe: boolean, ctl: AttemptControl, lastResort: boolean): Promise<Outcome> {
  const up = policy.request(ctx, ep);
  ctx.hooks.upstream.call(ctx, up);
  return new Promise((resolve) => {
    ep.dispatch({ path: up.path, method: up.method as Dispatcher.HttpMethod, headers: up.headers, body: up.body, replaySafe, lastResort }, new Relay(ctx, ep, policy, ctl, resolve));
  });
}

/** A reply that failed after its head arrived, while a buffer plan held it: the backend ran the
 *  request, so it is not sent again. The backend's failure (a code: reset, closed, idle) is the
 *  broken-reply error a piped reply ends with; one of ours (a reply over the plan's limit) is
 *  UPSTREAM_ERROR, as before. */
function afterHead(ep: Endpoint, error: Error): Error {
  if (errorCode(error) === undefined) return gwError('UPSTREAM_ERROR', { endpoint: ep.name, reason: error.message });
  return gwError('UPSTREAM_STREAM_BROKEN', { endpoint: ep.name, reason: brokenReason(error, ep.timeouts.idleMs) });
}

/** The per-request first-token deadline (X-Gw-First-Token-Timeout), or undefined. */
function firstTokenOverride(ctx: Context): number | undefined {
  const value = ctx.header(FIRST_TOKEN_HEADER);
  if (value === undefined) return undefined;
  try {
    return parseDuration(value.trim());
  } catch {
    throw gwError('BAD_REQUEST', { reason: `the ${FIRST_TOKEN_HEADER} header must be a duration such as 10s or 500ms` });
  }
}

/** Wait `ms`; false when the client went away meanwhile (the wait ends at once). */
async function pause(ctx: Context, ms: number): Promise<boolean> {
  if (ctx.res.destroyed) return false;
  const gone = new AbortController();
  const onClose = () => gone.abort();
  ctx.res.once('close', onClose);
  try {
    await sleep(ms, undefined, { signal: gone.signal });
  } catch {
    // aborted: the client left
  } finally {
    ctx.res.off('close', onClose);
  }
  return !ctx.res.destroyed;
}

/** Doubling backoff with full jitter in [½, 1½) of the step: retries of many requests spread out. */
const backoff = (baseMs: number, round: number) => baseMs * 2 ** (round - 1) * (0.5 + Math.random());

/** Send the request to ctx.candidates in order (see the top of this file) — or to `candidates`,
 *  a subset a terminal step narrowed them to (those that serve the path, say); resolves once a
 *  reply was relayed, or throws the error the client should get. */
export async function sendUpstream(ctx: Context, policy: SendPolicy, candidates: readonly Endpoint[] = ctx.candidates): Promise<true> {
  const log = ctx.route.log;
  const retry = policy.retry;
  let models = ctx.candidateModels;
  let fallbackFrom = ctx.fallbackFrom;
  if (candidates !== ctx.candidates) ({ models, fallbackFrom } = subsetPlan(ctx, candidates));
  const firstTokenOverrideMs = retry ? firstTokenOverride(ctx) : undefined;
  let streaming: boolean | undefined;
  let skipped = 0;
  let failed = 0;
  let last: string | undefined;
  let full: Endpoint[] | null = null;
  let limited: Endpoint[] | null = null;
  /** The answer the client gets if nothing better comes: the last failure held back. */
  /** With whether it came from a fallback, and its entry in ctx.tried. */
  let held: (HeldReply & { fallback: boolean; entry: number }) | null = null;
  /** Candidates whose failure another try may fix, for the next round. */
  let again: number[] | null = null;
  let round = 0;
  let order: readonly number[] | null = null;
  let pos = 0;
  let waitedRetryAfter = false;
  /** The first candidate skipped for an open breaker, and whether it is now the last resort. */
  let firstOpen = -1;
  let lastResort = false;
  let budgetSpent = false;
  /** After a context-length error: only candidates with a larger window. */
  let minContext = 0;
  let safe = false;
  const budgetEnds = ctx.start + (retry?.budgetMs ?? Infinity);
  /** How routing decided before any fallback: restored when the answer is the primary's after all. */
  const routed = ctx.routing;
  const ctl: AttemptControl = {
    canRetry: () => safe && retry !== undefined && ctx.attempts <= policy.maxRetries && performance.now() < budgetEnds && retry.fleet.canRetry(),
    passedOn: () => {
      if (safe && retry && ctx.attempts <= policy.maxRetries && performance.now() < budgetEnds && !retry.fleet.canRetry()) retry.fleet.exhausted++;
    },
    contextFallback: false,
    clientErrorsFail: false,
    firstTokenMs: 0,
    budgetEnds,
    watch: true,
  };
  retry?.fleet.deposit();

  /** The next candidate index, -1 when none is left: each in order, then rounds over the ones
   *  whose failure another try may fix. */
  const next = (): number => {
    for (;;) {
      if (order === null) {
        if (pos < candidates.length) return pos++;
      } else if (pos < order.length) return order[pos++];
      if (firstOpen >= 0 && ctx.attempts === 0 && !lastResort && policy.lastResort !== false) {
        // Every candidate was skipped for an open breaker: the first one gets the request as its
        // test request rather than the client a refusal for the whole open period.
        lastResort = true;
        return firstOpen;
      }
      if (!again || !retry || ctx.attempts > policy.maxRetries) return -1;
      order = again;
      again = null;
      pos = 0;
      round++;
    }
  };

  for (let k = next(); k >= 0; k = next()) {
    if (ctx.attempts > policy.maxRetries) break;
    const ep = candidates[k];
    // Removed by a reload since the candidates were chosen: it takes no new requests.
    if (ep.retired) continue;
    const model = models?.[k];
    if (minContext > 0 && ((model && retry?.contextWindow(ep, model)) || 0) <= minContext) continue;
    if (round > 0) {
      // A second try of an endpoint: after a backoff, or after its Retry-After — once per request,
      // and only when it is the request's one endpoint (with others, the request moved on).
      const now = performance.now();
      const cooling = ep.coolingUntil - now;
      const delay = Math.max(backoff(retry!.backoffMs, round), cooling);
      if (cooling > 0 && (waitedRetryAfter || !alone(candidates, ep))) continue;
      if (now + delay >= budgetEnds) continue;
      if (cooling > 0) waitedRetryAfter = true;
      if (!(await pause(ctx, delay))) {
        ctx.error = new ClientGone();
        return true;
      }
    }
    // The request's budget spent (a deadline may fire a hair early): no further attempt.
    if (ctx.attempts > 0 && retry && performance.now() >= budgetEnds) {
      budgetSpent = true;
      break;
    }
    // Every attempt after the first is a retry: the fleet's budget has the last word.
    if (ctx.attempts > 0 && retry && !retry.fleet.tryRetry()) {
      log.warn({ req: ctx.id }, 'the fleet retry budget (proxy.retry.fleet) is spent: no further attempt');
      break;
    }
    // A requests-per-minute limit: a token, or the next candidate (given back if not sent).
    const gate = ep.rateGate;
    if (gate && !gate.tryTake()) {
      (limited ??= []).push(ep);
      continue;
    }
    // Decided before any slot is taken: a policy that throws leaves no slot held.
    safe = policy.replaySafe(ctx, ep);
    // A concurrency limit: a free slot at once (no allocation), else a wait in the queue.
    const queue = ep.queue !== null && (policy.queued === undefined || policy.queued(ctx, ep)) ? ep.queue : null;
    if (queue && !queue.tryEnter()) {
      const waitFrom = performance.now();
      let turn;
      try {
        turn = await waitForSlot(ctx, ep, queue);
      } finally {
        if (turn !== 'admitted') gate?.refund();
      }
      ctx.queueMs += performance.now() - waitFrom;
      if (turn === 'full') {
        (full ??= []).push(ep);
        continue;
      }
      if (turn === 'gone') {
        ctx.error = new ClientGone();
        return true;
      }
      if (turn === 'retired') continue;
    }
    const admittedAt = queue ? performance.now() : 0;
    ctx.endpoint = ep;
    ctx.attemptModel = model;
    if (model !== undefined) ctx.sentModel = model;
    ctx.attempts++;
    if (retry) {
      const fromFallback = k >= fallbackFrom;
      ctl.contextFallback = fallbackFrom < candidates.length && !fromFallback && largerContextAhead(ctx, candidates, models, k, retry);
      ctl.clientErrorsFail = fromFallback && held !== null;
      ctl.watch = policy.watched === undefined || policy.watched(ctx, ep);
      ctl.firstTokenMs = 0;
      const f = ep.failover;
      if (safe && (firstTokenOverrideMs ?? f.coldFirstTokenMs) > 0 && (streaming ??= policy.streaming?.(ctx) === true)) {
        // Cold loads are not stalls: a model the endpoint reports not loaded gets the longer deadline.
        const name = model ?? ctx.model;
        ctl.firstTokenMs = firstTokenOverrideMs ?? (name !== undefined && retry.cold(ep, name) ? f.coldFirstTokenMs : f.firstTokenMs);
      }
    }
    // Said before the attempt: its reply head carries the routing headers.
    if (k >= fallbackFrom) fellBack(ctx, models);
    let outcome: Outcome;
    try {
      // A retry on the request's one endpoint is its only hope too: its breaker, opened by this
      // very failure perhaps, lets it through as the test request (one at a time).
      outcome = await attempt(ctx, ep, policy, safe, ctl, lastResort || !ep.routable || (round > 0 && alone(candidates, ep)));
    } finally {
      queue?.release(admittedAt);
    }
    if (outcome.relayed) {
      if (ctx.responseStarted && ctx.error && !(ctx.error instanceof ClientGone)) log.warn({ req: ctx.id, endpoint: ep.name, err: ctx.error }, 'the reply broke off after it had started');
      return true;
    }
    const { error, sent, answered } = outcome;
    if (error instanceof AttemptFailed) {
      tried(ctx, ep, model, error.outcome);
      log.warn({ req: ctx.id, endpoint: ep.name, model, failure: error.outcome }, 'attempt failed; trying the next candidate');
      // A fallback's client error never replaces the primary's failure as the answer.
      if (error.held && !(error.clientError && held)) held = { ...error.held, fallback: k >= fallbackFrom, entry: ctx.tried!.length - 1 };
      if (error.outcome.startsWith('context_length')) minContext = (model && retry!.contextWindow(ep, model)) || 1;
      else if (!error.clientError) (again ??= []).push(k);
      failed++;
      last = error.outcome;
      continue;
    }
    if (error instanceof BudgetSpent) {
      tried(ctx, ep, model, 'budget_spent');
      budgetSpent = true;
      break;
    }
    if (error instanceof BreakerOpen) {
      // Nothing went out: the endpoint's token is given back.
      ep.rateGate?.refund();
      ctx.attempts--;
      ctx.endpoint = null;
      if (!lastResort) skipped++;
      if (firstOpen < 0) firstOpen = k;
      continue;
    }
    if (error instanceof StepFailed) throw error.failure;
    if (unsendable(error)) throw gwError('BAD_REQUEST', { reason: `the request cannot be forwarded as it is: ${error.message}` });
    if (answered) throw afterHead(ep, error);
    const code = errorCode(error) ?? error.message;
    // Before the request went out anything is a connection failure (a TLS error too).
    const failure = connectionFailure(error) ?? (sent ? undefined : `connect failed (${code})`);
    const timeout = formatDuration(ep.timeouts.responseMs);
    if (!failure) throw gwError('UPSTREAM_ERROR', { endpoint: ep.name, reason: code });
    if (sent && !safe) {
      if (failure === 'timeout') throw gwError('UPSTREAM_TIMEOUT', { endpoint: ep.name, timeout, detail: 'not sent again: this route is not replay-safe (model management)' });
      throw gwError('UPSTREAM_ERROR', {
        endpoint: ep.name,
        reason: `connection ${failure} after the backend may have read the ${ctx.method} request; not sent again, so it never runs twice (model-management routes are not replay-safe)`,
      });
    }
    // Never reached the backend: its requests-per-minute token is given back.
    if (!sent) ep.rateGate?.refund();
    // A backend that took the request and dropped it may well take the next one (a crash and a
    // restart, a proxy in between): worth another try after a backoff, as a client would.
    else if (retry && (failure === 'reset' || failure === 'closed')) (again ??= []).push(k);
    failed++;
    last = failure;
    tried(ctx, ep, model, failure);
    log.warn({ req: ctx.id, endpoint: ep.name, failure }, 'attempt failed; trying the next endpoint');
  }
  if (held) {
    // Every attempt failed: the last backend answer held back is the most honest reply.
    if (held.fallback === false) ctx.routing = routed;
    ctx.tried![held.entry].answered = true;
    ctx.endpoint = held.endpoint;
    ctx.attemptModel = held.model;
    if (held.model !== undefined) ctx.sentModel = held.model;
    relayWhole(ctx, policy, held);
    return true;
  }
  // The request ends with the last attempt's failure: that entry is the answer, not a retry.
  const lastTried = ctx.tried?.[ctx.tried.length - 1];
  if (lastTried && ctx.endpoint?.name === lastTried.endpoint) lastTried.answered = true;
  const provider = ctx.family ?? ctx.route.pipeline;
  if (budgetSpent) throw gwError('BUDGET_EXCEEDED', { budget: formatDuration(retry!.budgetMs), attempts: ctx.attempts });
  // Busy, not broken: the client should come back shortly.
  if (full && failed === 0) queueFull(ctx, full);
  if (limited && failed === 0) endpointsRateLimited(ctx, limited);
  if (failed === 0 && skipped > 0) throw gwError('CIRCUIT_BREAKER', { provider, skipped });
  throw gwError('ENDPOINT_UNAVAILABLE', {
    provider,
    reason: `${failed} endpoint${failed === 1 ? '' : 's'} failed${last ? ` (last: ${last})` : ''}, ${skipped} skipped for an open circuit breaker${full ? `, ${full.length} with a full queue` : ''}`,
  });
}

/** The models and the first fallback of a subset of ctx.candidates in their order (a terminal
 *  step narrowed them): each keeps the model it had in the full list. */
function subsetPlan(ctx: Context, subset: readonly Endpoint[]): { models: readonly (string | undefined)[] | null; fallbackFrom: number } {
  const all = ctx.candidates;
  const full = ctx.candidateModels;
  if (!full) return { models: null, fallbackFrom: Infinity };
  const models: (string | undefined)[] = [];
  let fallbackFrom = Infinity;
  let j = 0;
  for (const ep of subset) {
    while (j < all.length && all[j] !== ep) j++;
    if (j >= all.length) return { models: null, fallbackFrom: Infinity }; // not in order: no models
    if (j >= ctx.fallbackFrom && fallbackFrom === Infinity) fallbackFrom = models.length;
    models.push(full[j++]);
  }
  return { models, fallbackFrom };
}

/** Is `ep` the request's only endpoint (a chain may list it under several models)? */
const alone = (candidates: readonly Endpoint[], ep: Endpoint) => candidates.every((e) => e === ep);

/** Record a failed attempt (access log, metrics). */
function tried(ctx: Context, ep: Endpoint, model: string | undefined, outcome: string): void {
  (ctx.tried ??= []).push({ endpoint: ep.name, family: ep.family, model: model ?? ctx.model, outcome });
}

/** Does a candidate after k serve its model with a larger context window than k does? */
function largerContextAhead(ctx: Context, candidates: readonly Endpoint[], models: readonly (string | undefined)[] | null, k: number, retry: RetrySettings): boolean {
  const own = models?.[k] ?? ctx.model;
  const mine = own ? retry.contextWindow(candidates[k], own) : undefined;
  if (!mine) return false;
  for (let j = k + 1; j < candidates.length; j++) {
    const m = models?.[j];
    if (m && (retry.contextWindow(candidates[j], m) ?? 0) > mine) return true;
  }
  return false;
}

/** A fallback model answered: the routing headers say so, and why. */
function fellBack(ctx: Context, models: readonly (string | undefined)[] | null): void {
  const first = ctx.tried?.[0];
  // The primary was not served at all: routing said so already.
  if (!first && ctx.routing?.decision === 'fallback') return;
  const primary = models?.[0] ?? first?.model ?? 'the requested model';
  const why = first ? `${first.outcome} from ${first.endpoint}` : 'not served';
  ctx.routing = { strategy: ctx.routing?.strategy ?? 'fallback', decision: 'fallback', reason: `model_fallback (${primary}: ${why})` };
}
