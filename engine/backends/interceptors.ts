// Per-endpoint concerns as undici dispatch interceptors, composed once per endpoint: every
// attempt the attempt loop sends goes through them, and no plugin has to remember any of it.
//   breaker     — admission (an open breaker skips the endpoint: BreakerOpen, nothing sent)
//                 and the outcome recorded on the breaker, with a pause the endpoint asked for
//                 (Retry-After on a 429 or 503: it goes last in the balancing order until then);
//   inflight    — active-request counts (least-connections) and the time to the reply head and
//                 to its first body byte (the p2c balancer's peak EWMA);
//   health      — a connection-level failure marks the endpoint unhealthy (and re-checks it);
//                 an answer from an endpoint out of rotation (a last resort) brings it back;
//   staleRetry  — a replay-safe request that a pooled socket failed (reset or closed after it
//                 went out, before any reply) is sent once more on a fresh connection: a socket
//                 the backend closed while idle fails this way and says nothing about the backend;
//   connection  — the pool, or a one-off connection for requests that must never run twice.
import { hash } from 'node:crypto';
import { Client, type Dispatcher } from 'undici';
import type { Endpoint } from './endpoints.js';
import type { ReplyHeaders } from '../core/json.js';
import type { Ticket } from './breaker.js';
import { BreakerOpen, connectionFailure, errorCode, notTheEndpoints } from './failures.js';

/** A test request whose answer already closed the breaker: from then on an ordinary request. */
const ANSWERED: Ticket = { probe: false };

type Handler = Dispatcher.DispatchHandler;
type Controller = Dispatcher.DispatchController;
type Trailers = Parameters<NonNullable<Handler['onResponseEnd']>>[1];
export type Dispatch = (opts: SendOptions, handler: Handler) => boolean;
export type Interceptor = (next: Dispatch) => Dispatch;

/** What the attempt loop dispatches: undici's options plus whether the request may be sent twice. */
export interface SendOptions extends Dispatcher.DispatchOptions {
  replaySafe: boolean;
  /** Set by staleRetry on its replay: a connection of its own. */
  fresh?: boolean;
  /** The request goes to an endpoint out of rotation as the last resort: its breaker's test
   *  request whatever is left of the open period (CircuitBreaker.admitLastResort). */
  lastResort?: boolean;
}

/** Passes every callback on; a subclass overrides the ones it watches. */
class Forwarding implements Handler {
  constructor(protected readonly next: Handler) {}
  onRequestStart(c: Controller, context: unknown): void {
    this.next.onRequestStart?.(c, context);
  }
  onResponseStart(c: Controller, status: number, headers: ReplyHeaders, message?: string): void {
    this.next.onResponseStart?.(c, status, headers, message);
  }
  onResponseData(c: Controller, chunk: Buffer): void {
    this.next.onResponseData?.(c, chunk);
  }
  onResponseEnd(c: Controller, trailers: Trailers): void {
    this.next.onResponseEnd?.(c, trailers);
  }
  onResponseError(c: Controller, error: Error): void {
    this.next.onResponseError?.(c, error);
  }
}

// ---- breaker ----------------------------------------------------------------------------------

/** What a request is, for a breaker opened for some requests (breaker.ts): method, path and body. */
function digestOf(opts: SendOptions): string {
  const { method, path, body } = opts;
  return hash('sha1', Buffer.isBuffer(body) || typeof body === 'string' ? `${method} ${path}\n${body}` : `${method} ${path}`);
}

class BreakerWatch extends Forwarding {
  private status = 0;
  constructor(
    private readonly ep: Endpoint,
    private ticket: Ticket,
    private readonly opts: SendOptions,
    next: Handler,
  ) {
    super(next);
  }
  /** A failure status that is an answer about this request (a 5xx but the gateway failures
   *  502–504): its digest (breaker.ts: an opening for these requests only); else undefined. */
  private answerAbout(): string | undefined {
    const s = this.status;
    return s >= 502 && s <= 504 ? undefined : digestOf(this.opts);
  }
  override onResponseStart(c: Controller, status: number, headers: ReplyHeaders, message?: string): void {
    if (status >= 200) this.status = status;
    if ((status === 429 || status === 503) && headers['retry-after'] !== undefined) this.ep.pauseFor(headers['retry-after']);
    // A test request answered: the backend is back, and the breaker closes now rather than when
    // a long generation ends (every other request waits on it meanwhile). If the reply then
    // breaks, that counts as an ordinary failure.
    if (this.ticket.probe && status >= 200 && !this.fails(status)) {
      this.ep.breaker.success(this.ticket);
      this.ticket = ANSWERED;
    }
    super.onResponseStart(c, status, headers, message);
  }
  /** 5xx counts against the endpoint, unless its profile calls that status transient (asleep). */
  private fails(status: number): boolean {
    return status >= 500 && !this.ep.profile.health.transient_statuses.includes(status);
  }
  override onResponseEnd(c: Controller, trailers: Trailers): void {
    if (this.fails(this.status)) this.ep.breaker.failure(this.ticket, this.answerAbout());
    else this.ep.breaker.success(this.ticket);
    super.onResponseEnd(c, trailers);
  }
  override onResponseError(c: Controller, error: Error): void {
    if (notTheEndpoints(error)) this.ep.breaker.release(this.ticket);
    else this.ep.breaker.failure(this.ticket);
    super.onResponseError(c, error);
  }
}

export const breaker =
  (ep: Endpoint): Interceptor =>
  (next) =>
  (opts, handler) => {
    const b = ep.breaker;
    const ticket = opts.lastResort ? b.admitLastResort() : b.scoped ? b.admitFor(digestOf(opts)) : b.admit();
    if (!ticket) {
      handler.onResponseError?.(null as unknown as Controller, new BreakerOpen(ep.name));
      return true;
    }
    try {
      return next(opts, new BreakerWatch(ep, ticket, opts, handler));
    } catch (err) {
      // Refused before it went out: a test request's turn is given back, not held for ever.
      ep.breaker.release(ticket);
      throw err;
    }
  };

// ---- inflight -----------------------------------------------------------------------------------

class InflightWatch extends Forwarding {
  private readonly started = performance.now();
  private open = true;
  /** A successful reply whose first body byte is still to come (its time is then recorded). */
  private awaitingBody = false;
  private answered = false;
  constructor(
    private readonly ep: Endpoint,
    next: Handler,
  ) {
    super(next);
  }
  private finish(): void {
    if (this.open) {
      this.open = false;
      this.ep.active--;
    }
  }
  private firstByte(): void {
    this.awaitingBody = false;
    const now = performance.now();
    this.ep.latency.record(now - this.started, now);
  }
  override onResponseStart(c: Controller, status: number, headers: ReplyHeaders, message?: string): void {
    if (status >= 200) {
      this.ep.upstream.record(performance.now() - this.started);
      this.answered = true;
      this.awaitingBody = status < 400;
    }
    super.onResponseStart(c, status, headers, message);
  }
  override onResponseData(c: Controller, chunk: Buffer): void {
    if (this.awaitingBody) this.firstByte();
    super.onResponseData(c, chunk);
  }
  override onResponseEnd(c: Controller, trailers: Trailers): void {
    if (this.awaitingBody) this.firstByte();
    this.finish();
    super.onResponseEnd(c, trailers);
  }
  override onResponseError(c: Controller, error: Error): void {
    // A reply that failed before its first byte (a timeout, a reset) counts as slow as it was,
    // never as fast: an endpoint that hangs must not look quick to p2c.
    if (this.open && (this.awaitingBody || !this.answered)) {
      const now = performance.now();
      const ms = now - this.started;
      if (ms > this.ep.latency.value(now)) this.ep.latency.record(ms, now);
    }
    this.finish();
    super.onResponseError(c, error);
  }
}

export const inflight =
  (ep: Endpoint): Interceptor =>
  (next) =>
  (opts, handler) => {
    ep.active++;
    return next(opts, new InflightWatch(ep, handler));
  };

/** Knows how far an attempt got: sent (undici started it on a connected socket), answered (a
 *  reply head arrived). */
class Tracking extends Forwarding {
  protected sent = false;
  protected answered = false;
  override onRequestStart(c: Controller, context: unknown): void {
    this.sent = true;
    super.onRequestStart(c, context);
  }
  override onResponseStart(c: Controller, status: number, headers: ReplyHeaders, message?: string): void {
    if (status >= 200) this.answered = true;
    super.onResponseStart(c, status, headers, message);
  }
}

// ---- health -------------------------------------------------------------------------------------

/** What proxied requests tell the health monitor (HealthMonitor implements it). */
export interface HealthReports {
  /** A connection-level failure. */
  markFailed(ep: Endpoint, reason: string): void;
  /** An answer below 500 from an endpoint out of rotation (a last-resort request's). */
  markAnswered(ep: Endpoint, status: number): void;
}

class HealthWatch extends Tracking {
  constructor(
    private readonly ep: Endpoint,
    private readonly reports: HealthReports,
    private readonly lastResort: boolean,
    next: Handler,
  ) {
    super(next);
  }
  override onResponseStart(c: Controller, status: number, headers: ReplyHeaders, message?: string): void {
    // A last resort answered: the endpoint is back, at once rather than at its next check. (Only
    // a last resort: a reply to a request sent before a check failed says nothing of now.)
    if (this.lastResort && status >= 200 && status < 500) this.reports.markAnswered(this.ep, status);
    super.onResponseStart(c, status, headers, message);
  }
  override onResponseError(c: Controller, error: Error): void {
    if (!this.answered && !notTheEndpoints(error)) {
      const failure = connectionFailure(error);
      // Before the request went out anything is a connection failure (a TLS error too).
      if (failure === 'timeout') this.reports.markFailed(this.ep, `no reply head within ${Math.round(this.ep.timeouts.responseMs / 1000)}s`);
      else if (failure || !this.sent) this.reports.markFailed(this.ep, `connection ${failure ?? `failed (${errorCode(error) ?? error.message})`}`);
    }
    super.onResponseError(c, error);
  }
}

export const health =
  (ep: Endpoint, reports: HealthReports): Interceptor =>
  (next) =>
  (opts, handler) =>
    next(opts, new HealthWatch(ep, reports, opts.lastResort === true, handler));

// ---- staleRetry ---------------------------------------------------------------------------------

/** Holds a pooled attempt's failure back when the socket may have been stale, and replays the
 *  request once on a fresh connection with the same handler underneath. */
class StaleWatch extends Tracking {
  constructor(
    private readonly ep: Endpoint,
    private readonly dispatch: Dispatch,
    private readonly opts: SendOptions,
    next: Handler,
  ) {
    super(next);
  }
  override onResponseError(c: Controller, error: Error): void {
    const failure = connectionFailure(error);
    if (this.sent && !this.answered && (failure === 'reset' || failure === 'closed')) {
      this.ep.staleRetries++;
      this.dispatch({ ...this.opts, fresh: true }, this.next);
    } else super.onResponseError(c, error);
  }
}

export const staleRetry =
  (ep: Endpoint): Interceptor =>
  (next) =>
  (opts, handler) =>
    opts.replaySafe ? next(opts, new StaleWatch(ep, next, opts, handler)) : next(opts, handler);

// ---- connection -------------------------------------------------------------------------------

/** Closes a one-off connection once its one reply is over. */
class CloseAfter extends Forwarding {
  constructor(
    private readonly client: Client,
    next: Handler,
  ) {
    super(next);
  }
  private close(): void {
    this.client.close().catch(() => undefined);
  }
  override onResponseEnd(c: Controller, trailers: Trailers): void {
    this.close();
    super.onResponseEnd(c, trailers);
  }
  override onResponseError(c: Controller, error: Error): void {
    this.close();
    super.onResponseError(c, error);
  }
}

/** The pool, or a connection of its own for a request that must never run twice (a stale pooled
 *  socket then cannot be what failed it) and for a stale-socket retry. */
export const connection =
  (ep: Endpoint): Dispatch =>
  (opts, handler) => {
    if (opts.replaySafe && !opts.fresh) return ep.pool.dispatch(opts, handler);
    const client = new Client(ep.origin, ep.dispatcherOptions());
    return client.dispatch(opts, new CloseAfter(client, handler));
  };

/** The endpoint's send path: breaker outermost, the connection innermost. */
export function endpointDispatch(ep: Endpoint, reports: HealthReports): Dispatch {
  const layers: Interceptor[] = [staleRetry(ep), health(ep, reports), inflight(ep), breaker(ep)];
  return layers.reduce<Dispatch>((next, layer) => layer(next), connection(ep));
}
