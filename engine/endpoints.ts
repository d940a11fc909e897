// Endpoints: the configured backends, their connection pools and health state. Credentials
// are read once at load and kept out of everything that is printed.
import { EventEmitter } from 'node:events';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { buildConnector, Pool } from 'undici';
import { CircuitBreaker, type BreakerSettings } from './breaker.js';
import type { EndpointConfig, GatewayConfig } from './config.js';
import { parseDuration } from './duration.js';
import { ConfigError } from './errors.js';
import { fnv1a36 } from './hash.js';
import type { Profile, ProfileSet } from './profiles.js';
import { closest, type Problem } from './schema.js';

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
}

export interface EndpointTimeouts {
  connectMs: number;
  responseMs: number;
  idleMs: number;
}

/** The URL as status routes show it: no userinfo, query or fragment. */
export function sanitizeUrl(url: URL): string {
  return `${url.origin}${url.pathname === '/' ? '' : url.pathname}`;
}

/** What the endpoint id hashes: scheme, host, port and path, the port always explicit. */
function identityOf(url: URL): string {
  const port = url.port || (url.protocol === 'https:' ? '443' : '80');
  return `${url.protocol}//${url.hostname.toLowerCase()}:${port}${url.pathname.replace(/\/+$/, '') || '/'}`;
}

export class Endpoint {
  readonly name: string;
  readonly profile: Profile;
  /** base36 FNV-1a of the sanitised URL, "-N" for siblings sharing it (set by the registry). */
  id = '';
  readonly identity: string;
  /** For status output: never credentials, query or fragment. */
  readonly url: string;
  readonly origin: string;
  /** URL path without a trailing slash ("" for the root): kept in front of every forwarded path. */
  readonly basePath: string;
  /** The URL's own query string (without "?"), added to every forwarded request; never shown. */
  readonly query: string;
  readonly priority: number;
  /** The backend's version when configured (feature checks such as msgapi min_version). */
  readonly version: string | undefined;
  readonly healthUrl: string;
  readonly modelUrl: string;
  readonly checkIntervalMs: number;
  readonly checkTimeoutMs: number;
  readonly headers: readonly string[];
  /** Lower-case names in `headers`: a client header of the same name is replaced, not doubled. */
  readonly headerNames: ReadonlySet<string>;
  readonly pool: Pool;
  readonly breaker: CircuitBreaker;
  state: HealthState = 'unknown';
  /** Proxied requests in flight (least-connections balancing). */
  active = 0;
  lastCheck: Date | null = null;
  lastLatencyMs = 0;
  lastError = '';
  /** Consecutive failed health checks (drives the backoff). */
  consecutiveFailures = 0;
  checksTotal = 0;
  checksPassed = 0;
  nextCheckAt: Date | null = null;

  constructor(plan: EndpointPlan, readonly timeouts: EndpointTimeouts, breaker: BreakerSettings) {
    this.name = plan.name;
    this.profile = plan.profile;
    this.identity = identityOf(plan.url);
    this.url = sanitizeUrl(plan.url);
    this.origin = plan.url.origin;
    this.basePath = plan.url.pathname.replace(/\/+$/, '');
    this.query = plan.url.search.slice(1);
    this.breaker = new CircuitBreaker(breaker);
    this.priority = plan.priority;
    this.version = plan.version;
    this.healthUrl = plan.healthUrl;
    this.modelUrl = plan.modelUrl;
    this.checkIntervalMs = plan.checkIntervalMs;
    this.checkTimeoutMs = plan.checkTimeoutMs;
    this.headers = plan.headers;
    this.headerNames = new Set(plan.headers.filter((_, i) => i % 2 === 0));
    this.replaySafePaths = new Set(plan.profile.api.replay_safe_paths);
    this.connector = buildConnector({ timeout: timeouts.connectMs });
    this.pool = new Pool(this.origin, this.dispatcherOptions());
  }

  private readonly replaySafePaths: ReadonlySet<string>;
  /** Shared by the pool and the one-off fresh connections. */
  private readonly connector: buildConnector.connector;

  /** May this request be sent again after a connection-level failure? Safe methods always;
   *  others only on the paths the profile lists (inference), never on model management. */
  replaySafe(method: string, pathname: string): boolean {
    return method === 'GET' || method === 'HEAD' || method === 'OPTIONS' || this.replaySafePaths.has(pathname);
  }

  /** Options for this endpoint's pool, and for a one-off fresh connection to it. */
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

  get routable(): boolean {
    return ROUTABLE[this.state];
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

/** Turn endpoint config into plans; throws a ConfigError naming the field and the fix. */
export function planEndpoint(ep: EndpointConfig, index: number, profiles: ProfileSet, source: string): EndpointPlan {
  const where = `discovery.static.endpoints[${index}]`;
  const profile = profiles.byType.get(ep.type);
  if (!profile) {
    const guess = closest(ep.type, profiles.byType.keys());
    throw new ConfigError(source, `${where}.type`, `unknown backend family "${ep.type}" for endpoint "${ep.name}"`,
      `${guess ? `did you mean "${guess}"? ` : ''}known families: ${[...profiles.byType.keys()].sort().join(', ')}`);
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

/** All plans, or every problem found (for `gw validate`, which reports them all). */
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
      plans.push(planEndpoint(ep, i, profiles, source));
    } catch (err) {
      if (!(err instanceof ConfigError)) throw err;
      problems.push({ level: 'fail', field: err.field, message: err.problem, fix: err.fix });
    }
  });
  return { plans, problems };
}

/** Ids: the hash of the sanitised URL; siblings sharing one get -1, -2… in name order, so a
 *  credential change (not part of the URL identity) never renumbers them. */
export function assignIds(endpoints: readonly Endpoint[]): void {
  const groups = new Map<string, Endpoint[]>();
  for (const ep of endpoints) groups.set(ep.identity, [...(groups.get(ep.identity) ?? []), ep]);
  for (const [identity, group] of groups) {
    const hash = fnv1a36(identity);
    if (group.length === 1) group[0].id = hash;
    else [...group].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)).forEach((ep, i) => (ep.id = `${hash}-${i + 1}`));
  }
}

/** The live endpoints, grouped by family, with a cached routable list per family. */
export class EndpointRegistry extends EventEmitter {
  readonly all: readonly Endpoint[];
  private readonly families = new Map<string, { endpoints: Endpoint[]; routable: Endpoint[] }>();

  constructor(plans: EndpointPlan[], config: GatewayConfig) {
    super();
    const p = config.proxy;
    const breaker = { healthFailures: p.circuit_breaker.health_failures, proxyFailures: p.circuit_breaker.proxy_failures, openMs: parseDuration(p.circuit_breaker.open_timeout) };
    this.all = plans.map((plan) => new Endpoint(plan, {
      connectMs: parseDuration(p.connection_timeout),
      // The family's own timeout (the native runner's 5m) wins over the gateway-wide default.
      responseMs: parseDuration(plan.profile.characteristics.timeout ?? p.response_timeout),
      idleMs: parseDuration(p.stream_idle_timeout),
    }, breaker));
    assignIds(this.all);
    for (const ep of this.all) {
      const fam = this.families.get(ep.family) ?? { endpoints: [], routable: [] };
      fam.endpoints.push(ep);
      this.families.set(ep.family, fam);
    }
  }

  /** Routable endpoints of every family, in configuration order; replaced, never mutated. */
  routableAll: readonly Endpoint[] = [];
  /** Bumped on every health state change, so callers can cache what they derive from it. */
  version = 0;

  /** Routable endpoints of a family, in configuration order; the array is replaced, never mutated. */
  routable(family: string): readonly Endpoint[] {
    return this.families.get(family)?.routable ?? [];
  }

  endpoints(family: string): readonly Endpoint[] {
    return this.families.get(family)?.endpoints ?? [];
  }

  setState(ep: Endpoint, state: HealthState, reason = ''): void {
    if (ep.state === state) return;
    const from = ep.state;
    ep.state = state;
    const fam = this.families.get(ep.family)!;
    fam.routable = fam.endpoints.filter((e) => e.routable);
    this.routableAll = this.all.filter((e) => e.routable);
    this.version++;
    this.emit('state', ep, from, state, reason);
  }

  async close(): Promise<void> {
    await Promise.all(this.all.map((ep) => ep.pool.close().catch(() => ep.pool.destroy())));
  }
}
