// What the attempt loop did for one request: which endpoint and model each attempt went to, what
// failed on the way, how long it waited, and the timings of the upstream part. Written by the
// loop and its relay only; steps read it (headers, logs, metrics, stats) as ctx.attempt.
import type { Endpoint } from '../backends/endpoints.js';
import type { EndpointQueue, Waiter } from '../backends/queue.js';
import type { RoutingInfo } from './plan.js';
import type { Usage } from './usage.js';

/** One attempt that failed and was followed by another (or by the answer held back). */
export interface FailedAttempt {
  endpoint: string;
  /** The endpoint's family (metrics label). */
  family: string;
  model: string | undefined;
  /** What happened, short: "503", "reset", "first_token_timeout", "stream_error"… */
  outcome: string;
  /** When it failed: milliseconds from the request's arrival (a trace's attempt span ends there). */
  atMs: number;
  /** The backend answered a 4xx (a client error, a context too long, a 429): the request's fault
   *  or the backend's load, not a sign that the endpoint is failing (status counters). */
  clientError?: boolean;
  /** This attempt's failure is the request's answer (held back, or the last one): it is not a
   *  retry, and counts once against its endpoint. */
  answered?: boolean;
}

export class AttemptState {
  /** Attempts made: requests handed to an endpoint's send path. */
  count = 0;
  /** The endpoint of the current (or last) attempt; null before the first, and when none
   *  answered and the terminal step answered itself. */
  endpoint: Endpoint | null = null;
  /** The model name the current (or last) attempt sent when routing chose one (an alias's real
   *  name, a fallback model); undefined: the body's. */
  model: string | undefined = undefined;
  /** The attempts that failed before the one that answered; null: none. */
  tried: FailedAttempt[] | null = null;
  /** A fallback model answered: how, in the words of the routing headers (the plan's routing otherwise). */
  fellBack: RoutingInfo | null = null;
  /** Milliseconds spent in attempts (sent to settled) and waiting for a concurrency slot; the rest
   *  of the request's time is the gateway's own (and its waits before retries). */
  upstreamMs = 0;
  queueMs = 0;
  /** Milliseconds from the request's arrival to the first reply body chunk relayed; 0 before it. */
  firstChunkMs = 0;
  /** The reply is relayed as a stream (no Content-Length, or translated to events). */
  streamed = false;
  /** Continuations begun for a stream that broke after its content reached the client. */
  continued = 0;
  /** How such a break ended: a continuation finished the answer, none could, or what broke
   *  could not be continued (inside a tool call…); null: no stream broke so. */
  continuation: 'continued' | 'failed' | 'not_continuable' | null = null;
  /** The tokens the attempts whose replies reached the client used, while they are counted
   *  (Exchange.countsUsage); null: none counted. */
  usage: Usage | null = null;
  /** Why the answers of those attempts ended, as their engines said (stop, length…), while tokens
   *  are counted; null: none said. */
  finishReasons: string[] | null = null;
  /** The endpoint queue the request waits in now: its client leaving takes it out at once. */
  waiting: { queue: EndpointQueue; waiter: Waiter } | null = null;
}

/** What a request that made no attempt reads. */
export const NO_ATTEMPTS: Readonly<AttemptState> = Object.freeze(new AttemptState());
