// What the routing layer is handed: the request it routes (an Exchange: the kernel's Context is
// one) and the terminal step's policy for it (a SendPolicy: how to build the request for an
// endpoint, whether it may be sent twice, how to shape the reply, what its API's streams and
// errors look like). The layer knows no API of its own: what it needs to know of one comes in here.
import type { ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import type { Endpoint } from '../backends/endpoints.js';
import type { RetryBudget } from '../backends/retry-budget.js';
import type { ErrorFormat } from '../core/errors.js';
import type { ReplyHeaders } from '../core/json.js';
import type { AttemptState } from './attempt-state.js';
import type { ContinuationApi, Transcript } from './continuation.js';
import type { RoutePlan } from './plan.js';
import type { ReplyPlan } from './reply.js';
import type { StreamShape } from './stream-watch.js';
import type { UsageShape } from './usage.js';

export interface UpstreamRequest {
  method: string;
  /** Endpoint base path + the request's path and query. */
  path: string;
  /** Flat [name, value, name, value…] list. */
  headers: string[];
  body: Buffer | null;
  /** Client headers not to forward on this attempt (upstream-headers asks per lower-case name):
   *  a terminal step that translated the request to another API sets it, since the client's
   *  API-specific headers (its key among them) mean nothing to that backend. */
  omitClientHeader?: (name: string) => boolean;
}

/** One client request as the attempt loop sees it. */
export interface Exchange {
  readonly id: string;
  readonly method: string;
  readonly res: ServerResponse;
  /** performance.now() at arrival. */
  readonly start: number;
  readonly plan: RoutePlan | null;
  readonly log: Logger;
  /** How the route renders errors (a broken stream's last event is one). */
  readonly errorFormat: ErrorFormat;
  /** The route's backend family (named in errors when every endpoint failed); undefined on a
   *  route over every family, whose errors name the model instead. */
  readonly family: string | undefined;
  /** The model the request names (the body's, or the one routing sent). */
  readonly model: string | undefined;
  /** What went wrong, if anything (the relay records a reply that broke after its head). */
  error: unknown;
  /** The tokens this request uses are counted (someone is charged: keys are on). */
  readonly countsUsage: boolean;
  /** A request header (lower-case name). */
  header(name: string): string | undefined;
  elapsedMs(): number;
  /** Keep the attempt loop's record of this request (written by the loop and its relay only;
   *  steps read it). One loop runs per request. */
  track(rec: AttemptState): void;
  /** Run the route's upstream hook on one attempt's request (headers, the model's name). */
  prepare(up: UpstreamRequest): void;
}

/** What the loop knows of the API a terminal step speaks (plugins/apis/inference-api.ts). */
export interface ApiShape {
  /** How its streams' events read: first content, terminator, error. */
  readonly streams: StreamShape;
  /** Does this error body say the prompt is longer than the model's context window? */
  contextLengthError(text: string): boolean;
  /** Where its replies report the tokens used; absent: nothing is counted. */
  readonly usage?: UsageShape;
}

/** How failures are retried (proxy.retry), made once per terminal step (kernel retrySettings). */
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
export interface SendPolicy<C = Exchange> {
  /** Further attempts after the first. */
  maxRetries: number;
  /** Retries on statuses and stream failures, budgets, first-token deadlines; absent:
   *  connection failover only. */
  retry?: RetrySettings;
  /** The API it speaks; absent: streams are piped unwatched, no error is read. */
  api?: ApiShape;
  /** May the request go to the next endpoint after the backend may have read it? */
  replaySafe(ctx: C, ep: Endpoint): boolean;
  /** Does this request take one of the endpoint's concurrency slots (its queue)? Absent: yes. */
  queued?(ctx: C, ep: Endpoint): boolean;
  /** Does the request ask for a streamed reply (first_token_timeout applies)? Absent: no. Asked
   *  only when some deadline is set. */
  streaming?(ctx: C): boolean;
  /** Does the request run a model on this endpoint, so that a streamed reply is watched (held
   *  until its first content, its terminator checked)? Absent: yes. A model pull's progress
   *  stream is not a generation. */
  watched?(ctx: C, ep: Endpoint): boolean;
  /** The request for this endpoint, asking for `model` when routing chose the name (undefined:
   *  the body's); the route's upstream hook then runs on it. */
  request(ctx: C, ep: Endpoint, model: string | undefined): UpstreamRequest;
  /** How the reply is shaped; absent, or undefined for this reply: piped as is. */
  reply?(ctx: C, status: number, headers: ReplyHeaders): ReplyPlan | undefined;
  /** How a stream of this request that breaks after its content is continued by the next
   *  candidate on this endpoint (its engine's API for the route); null or absent: it is not.
   *  Asked per attempt: a lookup, no more. Candidates whose answer differs cannot continue. */
  continuation?(ctx: C, ep: Endpoint): ContinuationApi | null;
  /** The request that asks this endpoint to continue the answer so far (the route's upstream
   *  hook then runs on it), or why this request cannot be continued. Required with `continuation`. */
  continueRequest?(ctx: C, ep: Endpoint, model: string | undefined, answer: Transcript): UpstreamRequest | string;
  /** When no endpoint could take the request (none in the plan, every breaker open, every one
   *  failed before answering), the step answers itself instead of the error. Absent: the error. */
  unavailable?(ctx: C): true;
}
