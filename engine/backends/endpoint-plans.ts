// Endpoint plans: what each configured endpoint is, from the config and its profile, before any
// connection exists — its URL and identity, credentials (read once, never printed), limits, and
// the failover and timeout settings in force with where each came from. Settings a user writes
// beat built-in defaults, the most specific first: the endpoint, a custom profile, the config's
// proxy section, the built-in profile, the built-in default (effective()).
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import type { QueueSettings } from './queue.js';
import type { Rate } from './rate-buckets.js';
import { setInConfig, type EndpointConfig, type GatewayConfig } from '../core/config.js';
import { formatDuration, parseDuration } from '../core/duration.js';
import { ConfigError } from '../core/errors.js';
import { fnv1a36 } from '../core/hash.js';
import { familyLabel, isBuiltIn, suggestFamilies, type Profile, type ProfileSet } from '../core/profiles.js';
import type { Problem } from '../core/schema.js';

/** Everything about an endpoint that follows from config, before any connection exists. */
export interface EndpointPlan {
  index: number;
  name: string;
  profile: Profile;
  url: URL;
  priority: number;
  /** Its share of traffic against its peers (every balancer, affinity). */
  weight: number;
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
  /** When a request goes on to the next candidate. */
  failover: FailoverSettings;
  timeouts: EndpointTimeouts;
  /** Each failover and timeout setting in force, as written, and where it came from. */
  settings: EffectiveSettings;
}

/** An endpoint's failover settings, resolved at load (effective()). */
export interface FailoverSettings {
  /** Backend statuses that send the request on (proxy.retry.on_statuses). */
  retryStatuses: ReadonlySet<number>;
  /** Streams: the longest wait for the first content; 0 = none. A model the endpoint reports
   *  not loaded gets coldFirstTokenMs. */
  firstTokenMs: number;
  coldFirstTokenMs: number;
  /** A stream that breaks after its content: continued on another candidate? (proxy.continuation) */
  continuation: ContinuationSettings;
}

/** proxy.continuation in force for an endpoint (the endpoint whose stream broke decides). */
export interface ContinuationSettings {
  enabled: boolean;
  /** Continuations per request. */
  max: number;
  /** Only on endpoints serving the model that broke, never on a fallback model. */
  sameModelOnly: boolean;
}

export interface EndpointTimeouts {
  connectMs: number;
  /** To the reply head (undici's headersTimeout). */
  responseMs: number;
  /** Between two chunks of a reply (undici's bodyTimeout). */
  idleMs: number;
}

/** A setting in force: its value as written, and where it came from ("endpoint", "custom
 *  profile NAME", "proxy.KEY", "built-in profile NAME", "default"). */
export interface Effective<T = string> {
  value: T;
  from: string;
}

export interface EffectiveSettings {
  response_timeout: Effective;
  stream_idle_timeout: Effective;
  first_token_timeout: Effective;
  cold_first_token_timeout: Effective;
  retry_on_statuses: Effective<number[]>;
  continuation: Effective<boolean>;
  continuation_max: Effective<number>;
  continuation_same_model_only: Effective<boolean>;
}

/** The URL as status routes show it, and what the endpoint id hashes: scheme, host and port
 *  (the WHATWG origin: lower-case host, default port left out) and the path without trailing
 *  slashes; never userinfo, query or fragment. */
export function sanitizeUrl(url: URL): string {
  return `${url.origin}${url.pathname.replace(/\/+$/, '')}`;
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
    throw new ConfigError(
      source,
      `${where}.auth.${field}_file`,
      `cannot read the ${field} file ${file} (${(err as NodeJS.ErrnoException).code})`,
      'point it at a readable file holding only the secret',
    );
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
    throw new ConfigError(
      source,
      `${where}.auth`,
      'a basic auth block needs a username and a password (or their *_file variants)',
      'add username and password_file',
    );
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
  return new ConfigError(
    source,
    `${where}.url`,
    `endpoint "${ep.name}" has credentials embedded in its URL; the gateway refuses to start with them (they would leak into logs and status output)`,
    fix,
  );
}

/** The profile of types no profile names: a generic OpenAI-compatible backend (profiles/auto.yaml). */
export const AUTO_TYPE = 'auto';

/** Turn endpoint config into plans; throws a ConfigError naming the field and the fix. A type no
 *  profile names (its family, an alias, its engine's own name) fails with the one family it most
 *  likely meant; `auto` is the generic OpenAI-compatible family, by name only. */
export function planEndpoint(ep: EndpointConfig, index: number, config: GatewayConfig, profiles: ProfileSet, source: string): EndpointPlan {
  const where = `discovery.static.endpoints[${index}]`;
  const profile = profiles.byType.get(ep.type);
  if (!profile) {
    const [best] = suggestFamilies(ep.type, profiles);
    throw new ConfigError(
      source,
      `${where}.type`,
      `unknown backend family "${ep.type}" for endpoint "${ep.name}"`,
      best
        ? `did you mean ${familyLabel(best)}? write type: ${best.name}`
        : `write its family (docs/reference/profiles.md lists them with their engines), or type: ${AUTO_TYPE} for any OpenAI-compatible server`,
    );
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
  const settings = effectiveSettings(ep, profile, config);
  return {
    concurrency: concurrencyOf(ep, profile),
    rate: rateOf(ep, profile, config),
    failover: failoverOf(settings),
    timeouts: {
      connectMs: parseDuration(config.proxy.connection_timeout),
      responseMs: Math.min(parseDuration(settings.response_timeout.value), MAX_TIMER_MS),
      idleMs: Math.min(parseDuration(settings.stream_idle_timeout.value), MAX_TIMER_MS),
    },
    settings,
    index,
    name: ep.name,
    profile,
    url,
    priority: ep.priority ?? profile.characteristics.default_priority,
    weight: ep.weight ?? 1,
    version: ep.version,
    healthUrl: joinEndpointUrl(url, ep.health_check_url ?? profile.api.health_check_path ?? '/'),
    modelUrl: joinEndpointUrl(url, ep.model_url ?? profile.api.model_discovery_path ?? '/v1/models'),
    checkIntervalMs: duration('check_interval'),
    checkTimeoutMs: duration('check_timeout'),
    headers,
  };
}

/** The endpoint's own limits win over its profile's characteristics; no limit (or 0): no queue,
 *  unless the engine holds few models at once (model_switching: its queue serves by model). */
function concurrencyOf(ep: EndpointConfig, profile: Profile): QueueSettings | null {
  const c = profile.characteristics;
  const maxConcurrent = ep.max_concurrent_requests ?? c.max_concurrent_requests ?? 0;
  const m = ep.model_switching;
  if (maxConcurrent === 0 && !m) return null;
  return {
    maxConcurrent: maxConcurrent === 0 ? Number.POSITIVE_INFINITY : maxConcurrent,
    ...(m ? { turns: { atOnce: m.models_at_once, maxWaitMs: parseDuration(m.max_wait), minDwellMs: parseDuration(m.min_dwell) } } : {}),
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

/** The most specific setting a user wrote, else the built-in profile's, else the default. */
function effective<T>(ep: T | undefined, profile: Profile, fromProfile: T | undefined, config: GatewayConfig, proxyKey: string, fromProxy: T): Effective<T> {
  if (ep !== undefined) return { value: ep, from: 'endpoint' };
  const builtIn = isBuiltIn(profile);
  if (fromProfile !== undefined && !builtIn) return { value: fromProfile, from: `custom profile ${profile.name}` };
  if (setInConfig(config, proxyKey)) return { value: fromProxy, from: proxyKey };
  if (fromProfile !== undefined) return { value: fromProfile, from: `built-in profile ${profile.name}` };
  return { value: fromProxy, from: 'default' };
}

function effectiveSettings(ep: EndpointConfig, profile: Profile, config: GatewayConfig): EffectiveSettings {
  const c = profile.characteristics;
  const p = config.proxy;
  return {
    response_timeout: effective(ep.response_timeout, profile, c.timeout, config, 'proxy.response_timeout', p.response_timeout),
    stream_idle_timeout: effective(ep.stream_idle_timeout, profile, c.stream_idle_timeout, config, 'proxy.stream_idle_timeout', p.stream_idle_timeout),
    first_token_timeout: effective(ep.first_token_timeout, profile, c.first_token_timeout, config, 'proxy.first_token_timeout', p.first_token_timeout),
    cold_first_token_timeout: effective(
      ep.cold_first_token_timeout,
      profile,
      c.cold_first_token_timeout,
      config,
      'proxy.cold_first_token_timeout',
      p.cold_first_token_timeout,
    ),
    retry_on_statuses: effective(ep.retry_on_statuses, profile, c.retry_on_statuses, config, 'proxy.retry.on_statuses', p.retry.on_statuses),
    continuation: effective(ep.continuation?.enabled, profile, c.continuation?.enabled, config, 'proxy.continuation.enabled', p.continuation.enabled),
    continuation_max: effective(ep.continuation?.max, profile, c.continuation?.max, config, 'proxy.continuation.max', p.continuation.max),
    continuation_same_model_only: effective(
      ep.continuation?.same_model_only,
      profile,
      c.continuation?.same_model_only,
      config,
      'proxy.continuation.same_model_only',
      p.continuation.same_model_only,
    ),
  };
}

function failoverOf(s: EffectiveSettings): FailoverSettings {
  const firstTokenMs = parseDuration(s.first_token_timeout.value);
  const cold = parseDuration(s.cold_first_token_timeout.value);
  return {
    retryStatuses: new Set(s.retry_on_statuses.value),
    firstTokenMs: Math.min(firstTokenMs, MAX_TIMER_MS),
    coldFirstTokenMs: Math.min(cold || firstTokenMs, MAX_TIMER_MS),
    continuation: { enabled: s.continuation.value, max: s.continuation_max.value, sameModelOnly: s.continuation_same_model_only.value },
  };
}

/** All plans, and every problem found (for `gw validate`, which reports them all): FAILs, and
 *  WARNs for endpoints planned anyway (a queue setting without a concurrency limit). */
export function planEndpoints(config: GatewayConfig, profiles: ProfileSet, source: string): { plans: EndpointPlan[]; problems: Problem[] } {
  const plans: EndpointPlan[] = [];
  const problems: Problem[] = [];
  const names = new Set<string>();
  /** Where each backend is, and how it is asked (url and headers: two keys for one service are two). */
  const backends = new Map<string, string>();
  config.discovery.static.endpoints.forEach((ep, i) => {
    if (names.has(ep.name)) {
      problems.push({
        level: 'fail',
        field: `discovery.static.endpoints[${i}].name`,
        message: `endpoint name "${ep.name}" is used twice`,
        fix: 'give every endpoint its own name',
      });
    }
    names.add(ep.name);
    try {
      const plan = planEndpoint(ep, i, config, profiles, source);
      plans.push(plan);
      const backend = `${sanitizeUrl(plan.url).replace(/\/+$/, '')} ${plan.headers.join('\n')}`;
      const twin = backends.get(backend);
      if (twin !== undefined)
        problems.push({
          level: 'warn',
          field: `discovery.static.endpoints[${i}].url`,
          message: `endpoints "${twin}" and "${ep.name}" are the same backend (${sanitizeUrl(plan.url)}, asked the same way): it is counted twice (its load, its health checks) and its conversations are split between the two`,
          fix: `remove one of them; two backends need two urls`,
        });
      else backends.set(backend, ep.name);
      const turns = plan.concurrency?.turns;
      if (turns && turns.maxWaitMs + turns.minDwellMs >= plan.concurrency!.timeoutMs)
        problems.push({
          level: 'warn',
          field: `discovery.static.endpoints[${i}].model_switching.max_wait`,
          message: `endpoint "${ep.name}": max_wait + min_dwell (${formatDuration(turns.maxWaitMs + turns.minDwellMs)}) is not under its queue_timeout (${formatDuration(plan.concurrency!.timeoutMs)}): a request passed over may time out (429) before its model's turn`,
          fix: 'lower max_wait, or raise queue_timeout',
        });
      if (!plan.concurrency) {
        for (const field of ['max_queued_requests', 'queue_timeout'] as const) {
          if (ep[field] !== undefined)
            problems.push({
              level: 'warn',
              field: `discovery.static.endpoints[${i}].${field}`,
              message: `has no effect: endpoint "${ep.name}" has no concurrency limit (no max_concurrent_requests here or in the ${plan.profile.name} profile)`,
              fix: 'set max_concurrent_requests on the endpoint, or remove this key',
            });
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
    else
      [...members]
        .sort((a, b) => (plans[a].name < plans[b].name ? -1 : plans[a].name > plans[b].name ? 1 : 0))
        .forEach((m, k) => (ids[m] = `${hash}-${k + 1}`));
  }
  return ids;
}
