// Endpoints: the configured backends, their connection pools and health state. Credentials
// are read once at load and kept out of everything that is printed.
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { buildConnector, Pool } from 'undici';
import { CircuitBreaker, type BreakerSettings } from './breaker.js';
import type { Dispatch } from './interceptors.js';
import { EndpointQueue, type QueueSettings } from './queue.js';
import type { EndpointRateGate, Rate } from './rate-buckets.js';
import { retryAfterMs } from './health.js';
import { recentEnough } from './version.js';
import type { EndpointConfig, GatewayConfig } from '../core/config.js';
import { parseDuration } from '../core/duration.js';
import { ConfigError } from '../core/errors.js';
import { fnv1a36 } from '../core/hash.js';
import type { Profile, ProfileSet } from '../core/profiles.js';
import { closest, type Problem } from '../core/schema.js';

export type HealthState = 'unknown' | 'healthy' | 'busy' | 'warming' | 'offline' | 'unhealthy';
export const ROUTABLE: Readonly<Record<HealthState, boolean>> = {
  unknown: false, healthy: true, busy: true, warming: true, offline: false, unhealthy: false,
};

/** Everything about an endpoint that follows from config, before any connection exists. */
export interface EndpointPlan {
  index: number;
  name: string;
  profile: Profile;
  url: URL;
  priority: number;
  version?: string;
  healthUrl: string;
  modelUrl: string;
  checkIntervalMs: number;
  checkTimeoutMs: number;
  /** Configured headers and the auth header, flat; values are secrets and never printed. */
  headers: string[];
  /** The concurrency limit and its queue (backends/queue.ts); null: no limit. */
  concurrency: QueueSettings | null;
  /** Requests per minute this endpoint takes (server.rate_limits.per_endpoint); null: no limit. */
  rate: Rate | null;
  /** When a request goes on to the next candidate (endpoint > profile > proxy settings). */
  failover: FailoverSettings;
}

/** An endpoint's failover settings, resolved at load: endpoint, else profile, else proxy. */
export interface FailoverSettings {
  /** Backend statuses that send the request on (proxy.retry.on_statuses). */
  retryStatuses: ReadonlySet<number>;
  /** Streams: the longest wait for the first content; 0 = none. A model the endpoint reports
   *  not loaded gets coldFirstTokenMs. */
  firstTokenMs: number;
  coldFirstTokenMs: number;
}

const NO_FAILOVER: FailoverSettings = { retryStatuses: new Set(), firstTokenMs: 0, coldFirstTokenMs: 0 };

export interface EndpointTimeouts {
  connectMs: number;
  responseMs: number;
  idleMs: number;
}

/** The URL as status routes show it, and what the endpoint id hashes: scheme, host and port
 *  (the WHATWG origin: lower-case host, default port left out) and the path without trailing
 *  slashes; never userinfo, query or fragment. */
export function sanitizeUrl(url: URL): string {
  return `${url.origin}${url.pathname.replace(/\/+$/, '')}`;
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
  name!: string;
  profile!: Profile;
  /** URL path without a trailing slash ("" for the root): kept in front of every forwarded path. */
  basePath!: string;
  /** The URL's own query string (without "?"), added to every forwarded request; never shown. */
  query!: string;
  priority!: number;
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
  failover: FailoverSettings = NO_FAILOVER;
  /** A request is on its way to it as the last resort of its family (nothing routable): one at
   *  a time (select-endpoint). */
  trial = false;
  /** performance.now() until which the backend asked us to wait (its Retry-After on a 429 or
   *  503): tried only when no other candidate is left. */
  coolingUntil = 0;
  state: HealthState = 'unknown';
  /** Proxied requests in flight (least-connections balancing). */
  active = 0;
  /** Replies from this endpoint being relayed to clients as streams now (the kernel's relay). */
  streams = 0;
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
  private replaySafePaths!: ReadonlySet<string>;
  /** Paths whose requests take a concurrency slot: the profile's generation and embedding routes. */
  private slotPaths!: ReadonlySet<string>;
  /** Shared by the pool and the one-off connections. */
  private connector!: buildConnector.connector;

  constructor(id: string, plan: EndpointPlan, timeouts: EndpointTimeouts, breaker: BreakerSettings) {
    this.id = id;
    this.url = sanitizeUrl(plan.url);
    this.origin = plan.url.origin;
    this.breaker = new CircuitBreaker(breaker);
    this.apply(plan, timeouts);
  }

  /** Take a plan's settings (same id, so the same backend). Returns the pool it replaced, if
   *  the connection settings changed: the caller closes it once its requests are done. */
  apply(plan: EndpointPlan, timeouts: EndpointTimeouts): Pool | undefined {
    this.name = plan.name;
    this.profile = plan.profile;
    this.basePath = plan.url.pathname.replace(/\/+$/, '');
    this.query = plan.url.search.slice(1);
    this.priority = plan.priority;
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
  private applyConcurrency(settings: QueueSettings | null): void {
    if (settings) {
      if (this.queue) this.queue.configure(settings);
      else this.queue = new EndpointQueue(settings);
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

  /** May this request be sent again after a connection-level failure? Safe methods always;
   *  others only on the paths the profile lists (inference), never on model management. */
  /** Does a request for this path take one of the endpoint's concurrency slots? Only inference
   *  does: status, model-management and tokenizer routes never wait behind a generation. */
  takesSlot(pathname: string): boolean {
    return this.slotPaths.has(pathname);
  }

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

  get uptimePercentage(): number {
    return this.checksTotal === 0 ? 0 : Math.round((this.checksPassed / this.checksTotal) * 10_000) / 100;
  }

  get family(): string {
    return this.profile.name;
  }

  /** The backend asked for a pause (Retry-After: seconds or an HTTP date; at most an hour). */
  pauseFor(retryAfter: string | string[]): void {
    const ms = retryAfterMs(retryAfter);
    if (ms !== undefined) this.coolingUntil = performance.now() + Math.min(ms, 3_600_000);
  }

  /** It answered a Retry-After that has not passed yet. */
  cooling(now: number): boolean {
    return this.coolingUntil > now;
  }

  get routable(): boolean {
    return !this.retired && ROUTABLE[this.state];
  }
}

/** Health path or URL: absolute as given; relative joined to the URL, keeping its base path. */
export function joinEndpointUrl(base: URL, pathOrUrl: string): string {
  if (/^https?:\/\//i.test(pathOrUrl)) return pathOrUrl;
  const basePath = base.pathname.replace(/\/+$/, '');
  const joined = `${base.origin}${basePath}${pathOrUrl.startsWith('/') ? '' : '/'}${pathOrUrl}`;
  return base.search ? `${joined}${joined.includes('?') ? '&' : '?'}${base.search.slice(1)}` : joined;
}

function secret(file: string | undefined, inline: string | undefined, field: string, where: string, source: string): string | undefined {
  if (inline !== undefined) return inline;
  if (file === undefined) return undefined;
  try {
    return readFileSync(resolve(file), 'utf8').replace(/\r?\n$/, '');
  } catch (err) {
    throw new ConfigError(source, `${where}.auth.${field}_file`, `cannot read the ${field} file ${file} (${(err as NodeJS.ErrnoException).code})`, 'point it at a readable file holding only the secret');
  }
}

function authHeader(ep: EndpointConfig, where: string, source: string): string | undefined {
  const a = ep.auth;
  if (!a) return undefined;
  if (a.type === 'bearer') {
    const token = secret(a.token_file, a.token, 'token', where, source);
    if (!token) throw new ConfigError(source, `${where}.auth`, 'a bearer auth block needs token or token_file', 'add token_file: /run/secrets/<name>');
    return `Bearer ${token}`;
  }
  const user = secret(a.username_file, a.username, 'username', where, source);
  const pass = secret(a.password_file, a.password, 'password', where, source);
  if (user === undefined || pass === undefined) {
    throw new ConfigError(source, `${where}.auth`, 'a basic auth block needs a username and a password (or their *_file variants)', 'add username and password_file');
  }
  return `Basic ${Buffer.from(`${user}:${pass}`).toString('base64')}`;
}

function userinfoError(ep: EndpointConfig, url: URL, where: string, source: string): ConfigError {
  const host = `${url.protocol}//${url.host}${url.pathname === '/' ? '' : url.pathname}`;
  const usernameOnly = url.username !== '' && url.password === '';
  const basic = `auth: { type: basic, username: <username>, password_file: /run/secrets/${ep.name}-password }`;
  const fix = usernameOnly
    ? `set url: ${host} and add either ${basic} or auth: { type: bearer, token_file: /run/secrets/${ep.name}-token }`
    : `set url: ${host} and add ${basic}`;
  return new ConfigError(source, `${where}.url`, `endpoint "${ep.name}" has credentials embedded in its URL; the gateway refuses to start with them (they would leak into logs and status output)`, fix);
}

/** The profile of types no profile names: a generic OpenAI-compatible backend (profiles/auto.yaml). */
export const AUTO_TYPE = 'auto';

/** Turn endpoint config into plans; throws a ConfigError naming the field and the fix. A type no
 *  profile names is taken as `auto`, with a warning that names the known families (a typo shows). */
export function planEndpoint(ep: EndpointConfig, index: number, profiles: ProfileSet, source: string, warn: (p: Problem) => void = () => {}): EndpointPlan {
  const where = `discovery.static.endpoints[${index}]`;
  let profile = profiles.byType.get(ep.type);
  if (!profile) {
    const guess = closest(ep.type, profiles.byType.keys());
    profile = profiles.byType.get(AUTO_TYPE);
    const known = `known families: ${[...profiles.byType.keys()].sort().join(', ')}`;
    if (!profile) throw new ConfigError(source, `${where}.type`, `unknown backend family "${ep.type}" for endpoint "${ep.name}"`, `${guess ? `did you mean "${guess}"? ` : ''}${known}`);
    warn({
      level: 'warn', field: `${where}.type`,
      message: `unknown backend family "${ep.type}" for endpoint "${ep.name}"; treated as ${AUTO_TYPE} (a generic OpenAI-compatible backend: health /, models /v1/models, routes under /gw/${AUTO_TYPE}/)`,
      fix: `${guess ? `did you mean "${guess}"? ` : ''}write type: ${AUTO_TYPE} to keep it so; ${known}`,
    });
  }
  let url: URL;
  try {
    url = new URL(ep.url);
  } catch {
    throw new ConfigError(source, `${where}.url`, `endpoint "${ep.name}" has an invalid URL`, 'write a full URL such as http://localhost:11434');
  }
  if (url.username || url.password) throw userinfoError(ep, url, where, source);
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new ConfigError(source, `${where}.url`, `endpoint "${ep.name}" URL must use http or https`, 'write a URL such as http://localhost:11434');
  }
  const headers: string[] = [];
  for (const [k, v] of Object.entries(ep.headers ?? {})) headers.push(k.toLowerCase(), v);
  const auth = authHeader(ep, where, source);
  if (auth) headers.push('authorization', auth);
  const duration = (field: 'check_interval' | 'check_timeout') => parseDuration(ep[field]);
  return {
    concurrency: concurrencyOf(ep, profile),
    rate: null,
    failover: NO_FAILOVER,
    index,
    name: ep.name,
    profile,
    url,
    priority: ep.priority ?? profile.characteristics.default_priority,
    version: ep.version,
    healthUrl: joinEndpointUrl(url, ep.health_check_url ?? profile.api.health_check_path ?? '/'),
    modelUrl: joinEndpointUrl(url, ep.model_url ?? profile.api.model_discovery_path ?? '/v1/models'),
    checkIntervalMs: duration('check_interval'),
    checkTimeoutMs: duration('check_timeout'),
    headers,
  };
}

/** The endpoint's own limits win over its profile's characteristics; no limit (or 0): no queue. */
function concurrencyOf(ep: EndpointConfig, profile: Profile): QueueSettings | null {
  const c = profile.characteristics;
  const maxConcurrent = ep.max_concurrent_requests ?? c.max_concurrent_requests ?? 0;
  if (maxConcurrent === 0) return null;
  return {
    maxConcurrent,
    maxQueued: ep.max_queued_requests ?? c.max_queued_requests,
    // A timer takes at most 2^31-1 ms (24.8 days); past that Node fires it at once.
    timeoutMs: Math.min(parseDuration(ep.queue_timeout ?? c.queue_timeout), MAX_TIMER_MS),
  };
}

const MAX_TIMER_MS = 2 ** 31 - 1;

/** The endpoint's requests-per-minute limit: its own requests_per_minute, else the per-endpoint
 *  default when its profile declares one (characteristics.endpoint_rate_limit: the hosted
 *  services, whose quotas are per key); 0 or none: no limit. */
function rateOf(ep: EndpointConfig, profile: Profile, config: GatewayConfig): Rate | null {
  const limits = config.server.rate_limits;
  const perMinute = ep.requests_per_minute ?? (profile.characteristics.endpoint_rate_limit ? limits.per_endpoint.default_requests_per_minute : 0);
  return perMinute > 0 ? { perMinute, burst: limits.burst_size } : null;
}

function failoverOf(ep: EndpointConfig, profile: Profile, config: GatewayConfig): FailoverSettings {
  const c = profile.characteristics;
  const p = config.proxy;
  const firstTokenMs = parseDuration(ep.first_token_timeout ?? c.first_token_timeout ?? p.first_token_timeout);
  const cold = parseDuration(ep.cold_first_token_timeout ?? c.cold_first_token_timeout ?? p.cold_first_token_timeout);
  return {
    retryStatuses: new Set(ep.retry_on_statuses ?? c.retry_on_statuses ?? p.retry.on_statuses),
    firstTokenMs: Math.min(firstTokenMs, MAX_TIMER_MS),
    coldFirstTokenMs: Math.min(cold || firstTokenMs, MAX_TIMER_MS),
  };
}

/** All plans, and every problem found (for `gw validate`, which reports them all): FAILs, and
 *  WARNs for endpoints planned anyway (an unknown type taken as auto). */
export function planEndpoints(config: GatewayConfig, profiles: ProfileSet, source: string): { plans: EndpointPlan[]; problems: Problem[] } {
  const plans: EndpointPlan[] = [];
  const problems: Problem[] = [];
  const names = new Set<string>();
  config.discovery.static.endpoints.forEach((ep, i) => {
    if (names.has(ep.name)) {
      problems.push({ level: 'fail', field: `discovery.static.endpoints[${i}].name`, message: `endpoint name "${ep.name}" is used twice`, fix: 'give every endpoint its own name' });
    }
    names.add(ep.name);
    try {
      const plan = planEndpoint(ep, i, profiles, source, (p) => problems.push(p));
      plan.rate = rateOf(ep, plan.profile, config);
      plan.failover = failoverOf(ep, plan.profile, config);
      plans.push(plan);
      if (!plan.concurrency) {
        for (const field of ['max_queued_requests', 'queue_timeout'] as const) {
          if (ep[field] !== undefined) problems.push({ level: 'warn', field: `discovery.static.endpoints[${i}].${field}`, message: `has no effect: endpoint "${ep.name}" has no concurrency limit (no max_concurrent_requests here or in the ${plan.profile.name} profile)`, fix: 'set max_concurrent_requests on the endpoint, or remove this key' });
        }
      }
    } catch (err) {
      if (!(err instanceof ConfigError)) throw err;
      problems.push({ level: 'fail', field: err.field, message: err.problem, fix: err.fix });
    }
  });
  return { plans, problems };
}

/** Ids: the hash of the sanitised URL; plans sharing one get -1, -2… in name order, so a
 *  credential change (not part of the URL identity) never renumbers them. */
export function idsOf(plans: readonly EndpointPlan[]): string[] {
  const groups = new Map<string, number[]>();
  plans.forEach((p, i) => {
    const shown = sanitizeUrl(p.url);
    groups.set(shown, [...(groups.get(shown) ?? []), i]);
  });
  const ids: string[] = new Array(plans.length);
  for (const [shown, members] of groups) {
    const hash = fnv1a36(shown);
    if (members.length === 1) ids[members[0]] = hash;
    else [...members].sort((a, b) => (plans[a].name < plans[b].name ? -1 : plans[a].name > plans[b].name ? 1 : 0)).forEach((m, k) => (ids[m] = `${hash}-${k + 1}`));
  }
  return ids;
}

/** The timeouts of an endpoint's connections: the family's reply-head timeout wins over the
 *  gateway-wide default. */
export function timeoutsFor(profile: Profile, config: GatewayConfig): EndpointTimeouts {
  const p = config.proxy;
  return {
    connectMs: parseDuration(p.connection_timeout),
    responseMs: parseDuration(profile.characteristics.timeout ?? p.response_timeout),
    idleMs: parseDuration(p.stream_idle_timeout),
  };
}
