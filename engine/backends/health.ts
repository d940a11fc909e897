// Health checking: each endpoint on its own interval and timeout, one check in flight at a time,
// backoff after failures (interval, 2x, 4x, 8x, capped at the lower of 12x and 60 s); while an
// endpoint refuses connections, a connection tried every half second brings its check forward.
// Unknown → Healthy/Unhealthy on the first check; only routable endpoints get traffic, but for
// the last resort (select-endpoint): an endpoint out of rotation that answers it is Healthy at
// once (markAnswered), one that fails it stays as it was (markFailed changes nothing then).
import { connect } from 'node:net';
import { Agent, request } from 'undici';
import type { Logger } from 'pino';
import type { Endpoint, HealthState } from './endpoints.js';
import type { EndpointRegistry, Reconciled } from './registry.js';
import { SingleFlight } from './single-flight.js';
import { retryAfterMs } from '../core/head.js';

const BACKOFF_CAP_MS = 60_000;
/** While an endpoint refuses connections, how often a connection is tried (knock). */
export const KNOCK_MS = 500;
/** An engine that accepts connections again after refusing them is starting: until it passes
 *  (within STARTING_MS), it is checked every STARTING_CHECK_MS, not after its backoff (a
 *  llama-server answers 503 while it loads its model). */
const STARTING_MS = 120_000;
const STARTING_CHECK_MS = 1_000;
const TIMED_OUT = 'timed out';

/** Delay before the next check after `failures` consecutive failures. */
export function backoffDelay(intervalMs: number, failures: number): number {
  if (failures <= 0) return intervalMs;
  return Math.min(intervalMs * 2 ** (failures - 1), intervalMs * 12, BACKOFF_CAP_MS);
}

/** What one check found, before it is applied to the endpoint. */
interface Verdict {
  state: HealthState;
  reason: string;
  /** Counts as a failed check: backoff and the breaker's health count. */
  failed: boolean;
  retryAfterMs?: number;
}

function judge(ep: Endpoint, status: number, retryAfter: string | string[] | undefined): Verdict {
  if (status >= 200 && status < 300) return { state: 'healthy', reason: '', failed: false };
  if (status === 429) return { state: 'busy', reason: 'rate limited (429)', failed: false, retryAfterMs: retryAfterMs(retryAfter) };
  if (ep.profile.health.transient_statuses.includes(status)) return { state: 'warming', reason: `transient ${status} (sleeping or loading)`, failed: false };
  if (status === 401 || status === 403) {
    // A configuration error, not an outage: not routable, and not a breaker trip.
    return { state: 'unhealthy', reason: `health check rejected with ${status}: check the endpoint's auth block and headers`, failed: false };
  }
  // A server that answered at all is there (profile health.passing: below_500, the generic `auto`).
  if (status < 500 && ep.profile.health.passing === 'below_500') return { state: 'healthy', reason: '', failed: false };
  return { state: 'unhealthy', reason: `health check answered ${status}`, failed: true };
}

/** A failed check while the engine loads a model this gateway switched it to (model_switching) —
 *  an engine busy loading may answer its health route late or with 5xx — is not an outage, for as
 *  long as a request may wait for its reply head (the endpoint's response timeout). A refused
 *  connection is: nothing is there to load anything. */
function duringLoad(ep: Endpoint, v: Verdict): Verdict {
  if (!v.failed || (v.state === 'offline' && v.reason !== TIMED_OUT)) return v;
  const load = ep.queue?.turns?.loading();
  if (!load || performance.now() - load.since > ep.timeouts.responseMs) return v;
  return { state: 'warming', reason: `loading model ${load.model} (${v.reason})`, failed: false };
}

/** The endpoints' health as the backends' state uses it: checked here (HealthMonitor, in a gateway
 *  of one process and in the host of workers), or asked of the host (a worker's: sharing/). */
export interface Health {
  /** The first round of checks, then each endpoint on its own schedule. */
  start(): Promise<void>;
  /** After a reload: new endpoints are checked at once, removed ones no more. */
  reconcile(r: Reconciled): void;
  stop(): Promise<void>;
  /** A proxied request hit a connection error (backends/interceptors.ts). */
  markFailed(ep: Endpoint, reason: string): void;
  /** An endpoint out of rotation answered a proxied request (its last resort). */
  markAnswered(ep: Endpoint, status: number): void;
  /** One check now. */
  check(ep: Endpoint): Promise<void>;
}

/** What a connection failure does wherever the checks run: the endpoint out of rotation at once.
 *  False when it was out already (its last-resort request failed): it is left as it was, its
 *  checks on their schedule, so requests never grow the backoff beyond what failing checks do. */
export function takeOutOfRotation(registry: EndpointRegistry, log: Logger, ep: Endpoint, reason: string): boolean {
  if (!ep.routable) return false;
  ep.lastError = reason;
  if (ep.state !== 'unhealthy') log.warn({ endpoint: ep.name, id: ep.id, from: ep.state, reason }, 'endpoint unhealthy');
  registry.setState(ep, 'unhealthy', reason);
  return true;
}

export class HealthMonitor implements Health {
  private readonly timers = new Map<Endpoint, NodeJS.Timeout>();
  private readonly knocks = new Map<Endpoint, NodeJS.Timeout>();
  /** Endpoints starting (accepted a connection after refusing them): until when. */
  private readonly starting = new Map<Endpoint, number>();
  private readonly inFlight = new SingleFlight<Endpoint, void>();
  // Health probes use their own connections, so they never occupy or age the proxy's sockets.
  private readonly agent = new Agent({ keepAliveTimeout: 2_500, keepAliveMaxTimeout: 2_500 });
  private stopped = false;
  /** Aborts the checks under way at shutdown: stopping never waits on a backend that hangs. */
  private readonly halt = new AbortController();

  /** `afterPass`: run (not awaited) after each passing check — the engine's own reports (residency, load), which must
   *  neither delay nor join the health check (a connection failure's re-check must not wait on it). */
  constructor(
    private readonly registry: EndpointRegistry,
    private readonly log: Logger,
    private readonly afterPass?: (ep: Endpoint) => void,
  ) {}

  private started = false;

  /** Check every endpoint once (in parallel), then keep checking each on its own schedule. */
  async start(): Promise<void> {
    this.started = true;
    await Promise.all(this.registry.all.map((ep) => this.check(ep)));
  }

  /** After a reload: new endpoints are checked at once, removed ones no more. */
  reconcile(r: Reconciled): void {
    for (const ep of r.removed) {
      clearTimeout(this.timers.get(ep));
      this.timers.delete(ep);
    }
    if (this.started && !this.stopped) for (const ep of r.added) void this.check(ep);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.halt.abort();
    for (const t of this.timers.values()) clearTimeout(t);
    this.timers.clear();
    for (const t of this.knocks.values()) clearInterval(t);
    this.knocks.clear();
    this.starting.clear();
    await this.inFlight.drain();
    await this.agent.close();
  }

  /** A proxied request hit a connection error: take the endpoint out of rotation at once, and
   *  check it again at once rather than after check_interval — a backend that is fine (one
   *  dropped connection) is routable again as soon as its health route answers. */
  markFailed(ep: Endpoint, reason: string): void {
    if (takeOutOfRotation(this.registry, this.log, ep, reason) && !this.stopped && !ep.retired) void this.check(ep);
  }

  /** An endpoint out of rotation answered a proxied request (its last resort). A 2xx: it is back —
   *  Healthy at once, its backoff reset, the next check after check_interval. Another answer
   *  below 500: something answers there, so it is checked now rather than after its backoff. */
  markAnswered(ep: Endpoint, status: number): void {
    if (this.stopped || ep.routable || ep.retired) return;
    if (status < 200 || status >= 300) {
      void this.check(ep);
      return;
    }
    const from = ep.state;
    ep.consecutiveFailures = 0;
    ep.lastError = '';
    this.log.info({ endpoint: ep.name, id: ep.id, from, to: 'healthy', reason: `answered a request (${status})` }, 'endpoint recovered');
    this.registry.setState(ep, 'healthy');
    this.registry.emit('recovered', ep);
    this.afterPass?.(ep);
    this.schedule(ep, ep.checkIntervalMs);
  }

  /** One check now; a second call while one runs joins it instead of piling up. */
  check(ep: Endpoint): Promise<void> {
    return this.inFlight.run(ep, () => this.probe(ep));
  }

  private schedule(ep: Endpoint, delayMs: number): void {
    if (this.stopped || ep.retired) return;
    clearTimeout(this.timers.get(ep));
    ep.nextCheckAt = new Date(Date.now() + delayMs);
    const t = setTimeout(() => void this.check(ep), delayMs);
    t.unref();
    this.timers.set(ep, t);
  }

  private async probe(ep: Endpoint): Promise<void> {
    const started = performance.now();
    let verdict: Verdict;
    try {
      const res = await request(ep.healthUrl, {
        method: 'GET',
        headers: ep.headers as string[],
        signal: AbortSignal.any([this.halt.signal, AbortSignal.timeout(ep.checkTimeoutMs)]),
        dispatcher: this.agent,
      });
      await res.body.dump();
      verdict = judge(ep, res.statusCode, res.headers['retry-after']);
    } catch (err) {
      verdict = { state: 'offline', reason: describeError(err), failed: true };
    }
    verdict = duringLoad(ep, verdict);
    if (this.stopped || ep.retired) return;
    this.apply(ep, verdict, performance.now() - started);
  }

  private apply(ep: Endpoint, v: Verdict, latencyMs: number): void {
    const from = ep.state;
    ep.lastCheck = new Date();
    ep.lastLatencyMs = latencyMs;
    ep.checksTotal++;
    if (v.state === 'healthy') ep.checksPassed++;
    ep.lastError = v.reason;
    if (v.failed) {
      ep.consecutiveFailures++;
      ep.breaker.healthFailure();
    } else {
      ep.consecutiveFailures = 0;
      if (v.state === 'healthy') ep.breaker.healthSuccess();
    }
    if (from !== v.state) {
      const fields = { endpoint: ep.name, id: ep.id, from, to: v.state, reason: v.reason || undefined };
      if (v.state === 'healthy') this.log.info(fields, from === 'unknown' ? 'endpoint healthy' : 'endpoint recovered');
      else this.log.warn(fields, `endpoint ${v.state}`);
    }
    this.registry.setState(ep, v.state, v.reason);
    this.registry.emit('checked', ep, v.failed);
    if (v.state === 'healthy' && from !== 'healthy') this.registry.emit('recovered', ep);
    if (v.state === 'healthy') this.afterPass?.(ep);
    const startingUntil = this.starting.get(ep);
    const starting = startingUntil !== undefined && v.state !== 'healthy' && Date.now() < startingUntil;
    if (!starting) this.starting.delete(ep);
    this.schedule(ep, v.retryAfterMs ?? (starting && v.failed ? STARTING_CHECK_MS : backoffDelay(ep.checkIntervalMs, ep.consecutiveFailures)));
    if (v.state === 'offline' && v.reason !== TIMED_OUT) this.knock(ep);
  }

  /** Whether connections to the endpoint are being tried (knock). */
  knocking(ep: Endpoint): boolean {
    return this.knocks.has(ep);
  }

  /** While an endpoint refuses connections (stopped, restarting), a connection tried every
   *  KNOCK_MS — cheap, no request — and the full check run as soon as one is accepted, then every
   *  STARTING_CHECK_MS while it starts: a restarted engine is back within about a second of
   *  passing, not after its backoff. Not for one whose check timed out: a hung engine still
   *  accepts connections, and its checks keep their backoff. */
  private knock(ep: Endpoint): void {
    if (this.knocks.has(ep) || this.stopped || ep.retired) return;
    const url = new URL(ep.healthUrl);
    const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
    const port = Number(url.port) || (url.protocol === 'https:' ? 443 : 80);
    const done = () => {
      clearInterval(timer);
      this.knocks.delete(ep);
    };
    const timer = setInterval(() => {
      if (this.stopped || ep.retired || ep.state !== 'offline') return done();
      const socket = connect({ host, port });
      socket.setTimeout(KNOCK_MS, () => socket.destroy());
      socket.once('error', () => socket.destroy());
      socket.once('connect', () => {
        socket.destroy();
        if (!this.knocks.has(ep)) return;
        done();
        if (this.stopped || ep.retired) return;
        if (!this.starting.has(ep)) this.starting.set(ep, Date.now() + STARTING_MS);
        void this.check(ep);
      });
    }, KNOCK_MS);
    timer.unref();
    this.knocks.set(ep, timer);
  }
}

/** A short reason without URLs or credentials. */
export function describeError(err: unknown): string {
  const e = err as { code?: string; name?: string; cause?: { code?: string }; errors?: { code?: string }[] };
  if (e?.name === 'TimeoutError' || e?.name === 'AbortError') return TIMED_OUT;
  return e?.code ?? e?.errors?.[0]?.code ?? e?.cause?.code ?? e?.name ?? 'error';
}
