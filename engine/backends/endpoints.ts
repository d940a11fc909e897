// Endpoints: the configured backends, their connection pools and health state. Credentials
// are read once at load and kept out of everything that is printed.
import { buildConnector, Pool } from 'undici';
import { CircuitBreaker, type BreakerSettings } from './breaker.js';
import type { EngineLoadReport } from './engine-load.js';
import { FirstTokenTimes } from './first-tokens.js';
import { PeakEwma } from './peak-ewma.js';
import type { Dispatch } from './interceptors.js';
import { EndpointQueue, type QueueSettings } from './queue.js';
import type { EndpointRateGate, Rate } from './rate-buckets.js';
import { fnv1a32 } from '../core/hash.js';
import { retryAfterMs } from '../core/head.js';
import { recentEnough } from './version.js';
import type { Profile } from '../core/profiles.js';
import { sanitizeUrl, type EffectiveSettings, type EndpointPlan, type EndpointTimeouts, type FailoverSettings } from './endpoint-plans.js';

export type HealthState = 'unknown' | 'healthy' | 'busy' | 'warming' | 'offline' | 'unhealthy';
export const ROUTABLE: Readonly<Record<HealthState, boolean>> = {
  unknown: false,
  healthy: true,
  busy: true,
  warming: true,
  offline: false,
  unhealthy: false,
};

/** An attempt under way on an endpoint (routing/relay.ts): told when the endpoint is found down. */
export interface UnderWay {
  endpointDown(reason: string): void;
}

/** Time to the reply head of proxied requests (from the inflight interceptor). */
export class UpstreamTimings {
  count = 0;
  totalMs = 0;
  record(ms: number): void {
    this.count++;
    this.totalMs += ms;
  }
}

/**
 * One backend. The object lives as long as its id stays in the configuration: a reload applies
 * the new plan to it in place (pool, health, breaker and catalogue entries survive), replacing
 * the pool only when its connection settings changed.
 */
export class Endpoint {
  /** base36 FNV-1a of `url` (the sanitised URL), "-N" for siblings sharing it. */
  readonly id: string;
  /** For status output: never credentials, query or fragment. */
  readonly url: string;
  readonly origin: string;
  readonly breaker: CircuitBreaker;
  readonly upstream = new UpstreamTimings();
  /** Recent time to the first byte of a reply body (the p2c balancer's latency). */
  readonly latency = new PeakEwma();
  /** The APIs and models it refused a continuation's prefill for (a trailing assistant message),
   *  as "API model": a broken answer is asked for again from its start there (attempt-loop.ts). */
  readonly prefillRefused = new Set<string>();
  /** How long its streams' first content takes, per model and prompt size (a learned deadline). */
  readonly firstTokens = new FirstTokenTimes();
  /** id as a 32-bit number: what rendezvous hashing mixes with a conversation's key. */
  readonly idHash: number;
  name!: string;
  profile!: Profile;
  /** URL path without a trailing slash ("" for the root): kept in front of every forwarded path. */
  basePath!: string;
  /** The URL's own query string (without "?"), added to every forwarded request; never shown. */
  query!: string;
  priority!: number;
  /** Its share of traffic against its peers (every balancer, affinity); default 1. */
  weight!: number;
  /** The backend's version when configured (feature checks such as msgapi min_version). */
  version: string | undefined;
  /** It speaks the messages API itself: the profile declares it (api.msgapi_support.enabled) and
   *  the configured version, if any, is at least its min_version. Decided when settings apply. */
  speaksMessagesApi!: boolean;
  healthUrl!: string;
  modelUrl!: string;
  checkIntervalMs!: number;
  checkTimeoutMs!: number;
  headers!: readonly string[];
  /** Lower-case names in `headers`: a client header of the same name is replaced, not doubled. */
  headerNames!: ReadonlySet<string>;
  timeouts!: EndpointTimeouts;
  pool!: Pool;
  /** The send path (backends/interceptors.ts), set by the registry. */
  dispatch!: Dispatch;
  /** Out of the configuration: takes no new requests; its pool closes once in-flight ones end. */
  retired = false;
  /** Its concurrency limit and queue; null when it has no limit (nothing to do on its path). */
  queue: EndpointQueue | null = null;
  /** Its requests-per-minute limit (plan.rate); null when it has none. Set by the backends' state,
   *  which owns the buckets. */
  rate: Rate | null = null;
  rateGate: EndpointRateGate | null = null;
  failover!: FailoverSettings;
  /** The failover and timeout settings in force, and where each came from (status, gw validate). */
  settings!: EffectiveSettings;
  /** performance.now() until which the backend asked us to wait (its Retry-After on a 429 or
   *  503): tried only when no other candidate is left. */
  coolingUntil = 0;
  state: HealthState = 'unknown';
  /** Proxied requests in flight (least-connections balancing). */
  active = 0;
  /** What the engine last said it is running and holding in its queue (engine-load.ts); null: no
   *  such report, or none fresh. */
  engineLoad: EngineLoadReport | null = null;
  /** Replies from this endpoint being relayed to clients as streams now (routing/relay.ts). */
  streams = 0;
  /** Attempts sent to it and not settled: told when it is found down (foundDown). */
  readonly underWay = new Set<UnderWay>();
  /** Requests the stale-socket interceptor sent once more on a fresh connection. */
  staleRetries = 0;
  lastCheck: Date | null = null;
  lastLatencyMs = 0;
  lastError = '';
  /** Consecutive failed health checks (drives the backoff). */
  consecutiveFailures = 0;
  checksTotal = 0;
  checksPassed = 0;
  nextCheckAt: Date | null = null;
  // No private members: a plugin's read view (EndpointView) must stay assignable to the class.
  replaySafePaths!: ReadonlySet<string>;
  /** Paths whose requests take a concurrency slot: the profile's generation and embedding routes. */
  slotPaths!: ReadonlySet<string>;
  /** Shared by the pool and the one-off connections. */
  connector!: buildConnector.connector;

  /** `makeQueue`: where its queue's slots are kept (the host scope's: sharing/host.ts). */
  constructor(
    id: string,
    plan: EndpointPlan,
    breaker: BreakerSettings,
    readonly makeQueue: (ep: Endpoint, settings: QueueSettings) => EndpointQueue = (_, s) => new EndpointQueue(s),
  ) {
    this.id = id;
    this.idHash = fnv1a32(id);
    this.url = sanitizeUrl(plan.url);
    this.origin = plan.url.origin;
    this.breaker = new CircuitBreaker(breaker);
    this.breaker.onOpened = () => this.foundDown('its circuit breaker opened');
    this.apply(plan);
  }

  /** Take a plan's settings (same id, so the same backend). Returns the pool it replaced, if
   *  the connection settings changed: the caller closes it once its requests are done. */
  apply(plan: EndpointPlan): Pool | undefined {
    this.name = plan.name;
    this.profile = plan.profile;
    this.basePath = plan.url.pathname.replace(/\/+$/, '');
    this.query = plan.url.search.slice(1);
    this.priority = plan.priority;
    this.weight = plan.weight;
    this.version = plan.version;
    const msgapi = plan.profile.api.msgapi_support;
    this.speaksMessagesApi = msgapi?.enabled === true && recentEnough(plan.version, msgapi.min_version);
    this.healthUrl = plan.healthUrl;
    this.modelUrl = plan.modelUrl;
    this.checkIntervalMs = plan.checkIntervalMs;
    this.checkTimeoutMs = plan.checkTimeoutMs;
    this.headers = plan.headers;
    this.headerNames = new Set(plan.headers.filter((_, i) => i % 2 === 0));
    this.replaySafePaths = new Set(plan.profile.api.replay_safe_paths);
    this.slotPaths = new Set([...plan.profile.request.generation_paths, ...plan.profile.request.embedding_paths]);
    this.applyConcurrency(plan.concurrency);
    this.rate = plan.rate;
    this.failover = plan.failover;
    this.settings = plan.settings;
    const timeouts = plan.timeouts;
    const old = this.timeouts;
    if (old && old.connectMs === timeouts.connectMs && old.responseMs === timeouts.responseMs && old.idleMs === timeouts.idleMs) return undefined;
    this.timeouts = timeouts;
    this.connector = buildConnector({ timeout: timeouts.connectMs });
    const replaced = this.pool;
    this.pool = new Pool(this.origin, this.dispatcherOptions());
    return replaced;
  }

  /** A kept endpoint keeps its queue (waiters and counters) under new limits; a limit removed
   *  lets every waiter through at once, and in-flight attempts give their slots back to it. */
  applyConcurrency(settings: QueueSettings | null): void {
    if (settings) {
      if (this.queue) this.queue.configure(settings);
      else this.queue = this.makeQueue(this, settings);
    } else if (this.queue) {
      this.queue.lift();
      this.queue = null;
    }
  }

  /** Out of the configuration: no new requests; waiters move on to their next candidate. */
  retire(): void {
    this.retired = true;
    this.queue?.retire();
  }

  /** Evidence that it is down (taken out of rotation: a failed health check, a refused or timed-out
   *  connection; its breaker opened): each attempt under way decides whether to move on. Told on
   *  the next tick: the evidence may come from inside an attempt's own failure, which settles first. */
  foundDown(reason: string): void {
    if (this.underWay.size === 0) return;
    process.nextTick(() => {
      for (const attempt of [...this.underWay]) {
        // One attempt's trouble must not end the process nor spare the others.
        try {
          attempt.endpointDown(reason);
        } catch {}
      }
    });
  }

  /** Does a request for this path take one of the endpoint's concurrency slots? Only inference
   *  does: status, model-management and tokenizer routes never wait behind a generation. */
  takesSlot(pathname: string): boolean {
    return this.slotPaths.has(pathname);
  }

  /** May this request be sent again after a connection-level failure? Safe methods always;
   *  others only on the paths the profile lists (inference), never on model management. */
  replaySafe(method: string, pathname: string): boolean {
    return method === 'GET' || method === 'HEAD' || method === 'OPTIONS' || this.replaySafePaths.has(pathname);
  }

  /** Options for this endpoint's pool, and for a one-off connection to it. */
  dispatcherOptions() {
    return {
      connect: this.connector,
      headersTimeout: this.timeouts.responseMs,
      bodyTimeout: this.timeouts.idleMs,
      // Retire idle sockets before common upstream idle timeouts (about 3 s) close them under us.
      keepAliveTimeout: 2_500,
      keepAliveMaxTimeout: 2_500,
    };
  }

  /** Forwarded path: base path + the request's path, plus the URL's own query if it has one. */
  upstreamPath(path: string): string {
    const full = this.basePath + path;
    return this.query ? `${full}${full.includes('?') ? '&' : '?'}${this.query}` : full;
  }

  /** Requests it is serving now: this gateway's in flight, plus those the engine last reported
   *  serving for others while that report is fresh (engine-load.ts). */
  load(now: number): number {
    const r = this.engineLoad;
    return r === null || r.until < now ? this.active : this.active + r.others;
  }

  get uptimePercentage(): number {
    return this.checksTotal === 0 ? 0 : Math.round((this.checksPassed / this.checksTotal) * 10_000) / 100;
  }

  get family(): string {
    return this.profile.name;
  }

  /** A setting in force, for messages: "2s, response_timeout from proxy.response_timeout". */
  setting(key: keyof EffectiveSettings): string {
    const s = this.settings[key];
    return `${Array.isArray(s.value) ? s.value.join(', ') : s.value}, ${key} from ${s.from}`;
  }

  /** Told of a pause the backend asked for (its length in ms): other replicas may be spared. */
  onPause: ((ms: number) => void) | null = null;

  /** The backend asked for a pause (Retry-After: seconds or an HTTP date; at most an hour). */
  pauseFor(retryAfter: string | string[]): void {
    const ms = retryAfterMs(retryAfter);
    if (ms === undefined) return;
    const capped = Math.min(ms, 3_600_000);
    this.coolingUntil = performance.now() + capped;
    this.onPause?.(capped);
  }

  /** Another replica's answer from this endpoint asked for a pause of `ms` from now. */
  pausedElsewhere(ms: number): void {
    this.coolingUntil = Math.max(this.coolingUntil, performance.now() + ms);
  }

  /** It answered a Retry-After that has not passed yet. One that has is cleared, so that the next
   *  request need not read the clock for it (balancing checks `coolingUntil > 0` first). */
  cooling(now: number): boolean {
    if (this.coolingUntil > now) return true;
    this.coolingUntil = 0;
    return false;
  }

  get routable(): boolean {
    return !this.retired && ROUTABLE[this.state];
  }
}

/** An endpoint as a plugin sees it (the public API's `Endpoint`): its fields read-only — the
 *  backends' state and the attempt loop write them. */
export type EndpointView = Readonly<Endpoint>;
