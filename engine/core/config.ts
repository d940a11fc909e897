// Configuration per CONTRACT.md: file lookup, schema defaults, typo detection, environment
// overrides (they win over the file; an invalid value warns and falls back), deep-frozen result.
import { existsSync, readFileSync, statSync } from 'node:fs';
import { resolve } from 'node:path';
import { parseCidr } from './cidr.js';
import { DURATION_PATTERN, parseDuration } from './duration.js';
import { ConfigError } from './errors.js';
import { keysFromFile, keysProblems, type KeysConfig } from './keys.js';
import { OTEL_OVERRIDES, SECRET_ENV } from './otel-env.js';
import { explain, validatorOf, type Problem } from './schema.js';
import type { SharedStepDef } from './pipelines.js';
import { readYaml } from './yaml-file.js';

export type Duration = string;
export interface AuthConfig {
  type: 'basic' | 'bearer';
  username?: string;
  password?: string;
  username_file?: string;
  password_file?: string;
  token?: string;
  token_file?: string;
}
export interface EndpointConfig {
  name: string;
  type: string;
  url: string;
  priority?: number;
  weight: number;
  version?: string;
  health_check_url?: string;
  model_url?: string;
  check_interval: Duration;
  check_timeout: Duration;
  headers: Record<string, string>;
  auth?: AuthConfig;
  max_concurrent_requests?: number;
  max_queued_requests?: number;
  queue_timeout?: Duration;
  model_switching?: { models_at_once: number; max_wait: Duration; min_dwell: Duration };
  requests_per_minute?: number;
  retry_on_statuses?: number[];
  response_timeout?: Duration;
  stream_idle_timeout?: Duration;
  first_token_timeout?: Duration;
  cold_first_token_timeout?: Duration;
  continuation?: Partial<ContinuationConfig>;
}
/** proxy.continuation: a stream that breaks after its content is finished by another candidate. */
export interface ContinuationConfig {
  enabled: boolean;
  max: number;
  same_model_only: boolean;
}
/** proxy.affinity: a conversation's requests go where its prompt is cached. */
export interface AffinityConfig {
  enabled: boolean;
  max_load_factor: number;
  session_headers: string[];
}
export interface GatewayConfig {
  server: {
    host: string;
    port: number;
    workers: number | 'auto';
    shutdown_timeout: Duration;
    read_header_timeout: Duration;
    body_idle_timeout: Duration;
    read_timeout: Duration;
    idle_timeout: Duration;
    request_limits: { max_body_size: number; max_header_size: number };
    rate_limits: {
      global_requests_per_minute: number;
      per_ip_requests_per_minute: number;
      health_requests_per_minute: number;
      internal_requests_per_minute: number;
      burst_size: number;
      per_endpoint: { default_requests_per_minute: number };
      trust_proxy_headers: boolean;
      trusted_proxy_cidrs: string[];
      max_tracked_clients: number;
      store: 'memory' | 'redis';
      redis: { url: string; password_file?: string; key_prefix: string; timeout: Duration };
    };
  };
  proxy: {
    load_balancer: string;
    affinity: AffinityConfig;
    degraded_traffic: { busy_one_in: number; warming_one_in: number };
    connection_timeout: Duration;
    response_timeout: Duration;
    stream_idle_timeout: Duration;
    max_retries: number;
    profiles_dir: string;
    retry: { on_statuses: number[]; budget: Duration; backoff: Duration; fleet: { ratio: number; min_per_second: number; window: Duration } };
    first_token_timeout: Duration;
    cold_first_token_timeout: Duration;
    enable_optional_prefixes: boolean;
    continuation: ContinuationConfig;
    circuit_breaker: { health_failures: number; proxy_failures: number; open_timeout: Duration; initial_open_timeout: Duration; jitter: number };
  };
  discovery: {
    static: { endpoints: EndpointConfig[] };
    model_discovery: { enabled: boolean; interval: Duration; timeout: Duration; concurrent_workers: number; retry_attempts: number };
  };
  model_registry: {
    routing_strategy: {
      type: 'strict' | 'optimistic' | 'discovery';
      options: { fallback_behavior: 'compatible_only' | 'all' | 'none'; discovery_refresh_on_miss: boolean; discovery_timeout: Duration };
    };
  };
  /** A list: equivalent names; { models, ordered: true }: a fallback chain (plugins/routing/model-chains.ts). */
  model_aliases: Record<string, string[] | { models: string[]; ordered: boolean }>;
  model_fallbacks: Record<string, string[]>;
  /** API keys (engine/core/keys.ts): the inline ones and auth.keys_file's, joined when it loads. */
  auth: KeysConfig;
  translators: {
    msgapi: { enabled: boolean; max_message_size: number; passthrough: boolean; strip_billing_header: boolean; thinking_effort: boolean };
    responses: { passthrough: boolean; store: { max_responses: number; max_bytes: number; ttl: Duration } };
  };
  dashboard: { enabled: boolean; access_policy: { allowed_cidrs: string[]; allowed_hosts: string[] } };
  metrics: { enabled: boolean; gen_ai_conventions: 'default' | 'latest_experimental' };
  tracing: {
    enabled: boolean;
    endpoint: string;
    headers: Record<string, string>;
    service_name: string;
    sample_ratio: number;
    capture_content: boolean;
    batch_delay: string;
  };
  logging: { level: 'debug' | 'info' | 'warn' | 'error'; format: 'json' | 'text' };
  pipelines: { dir: string; before: SharedStepDef[]; after: SharedStepDef[]; watch: boolean };
  plugins: string[];
}

// Relative paths inside the config (profiles_dir, pipelines.dir, plugins, *_file) resolve
// against the working directory, as the default `config/profiles` implies.
export interface LoadedConfig {
  config: GatewayConfig;
  /** The file it came from, or "(built-in default)". */
  source: string;
  problems: Problem[];
}

export const BUILTIN_DEFAULT = '(built-in default)';

/** --config FILE, else $GW_CONFIG, else ./config/config.yaml if present, else the built-in default. */
export function resolveConfigPath(cliPath: string | undefined, env: NodeJS.ProcessEnv = process.env, cwd = process.cwd()): string | null {
  if (cliPath) return resolve(cwd, cliPath);
  if (env.GW_CONFIG) return resolve(cwd, env.GW_CONFIG);
  const local = resolve(cwd, 'config/config.yaml');
  return existsSync(local) ? local : null;
}

const checkStrict = validatorOf('config');
const fillDefaults = validatorOf('config', { useDefaults: true, removeAdditional: true });

const LEVELS = ['debug', 'info', 'warn', 'error'] as const;
function normaliseLevel(value: unknown): GatewayConfig['logging']['level'] | undefined {
  const level = String(value).trim().toLowerCase();
  return (LEVELS as readonly string[]).includes(level) ? (level as GatewayConfig['logging']['level']) : undefined;
}

type Override = (cfg: GatewayConfig, raw: string) => string | undefined;
const durationRe = new RegExp(DURATION_PATTERN);
const ENV_OVERRIDES: Record<string, Override> = {
  GW_SERVER_HOST: (c, v) => (v.trim() ? void (c.server.host = v.trim()) : 'must not be empty'),
  GW_SERVER_PORT: (c, v) => (/^\d+$/.test(v) && +v <= 65535 ? void (c.server.port = +v) : 'must be a port number 0-65535'),
  GW_SERVER_WORKERS: (c, v) =>
    v.trim() === 'auto'
      ? void (c.server.workers = 'auto')
      : /^\d+$/.test(v.trim()) && +v >= 1 && +v <= 256
        ? void (c.server.workers = +v)
        : 'must be a number 1-256 or auto',
  GW_LOGGING_LEVEL: (c, v) => {
    const level = normaliseLevel(v);
    return level ? void (c.logging.level = level) : 'must be one of debug, info, warn, error';
  },
  GW_DISCOVERY_MODEL_DISCOVERY_ENABLED: (c, v) => {
    const b = { true: true, '1': true, yes: true, false: false, '0': false, no: false }[v.trim().toLowerCase()];
    return b === undefined ? 'must be true or false' : void (c.discovery.model_discovery.enabled = b);
  },
  GW_DISCOVERY_MODEL_DISCOVERY_INTERVAL: (c, v) =>
    durationRe.test(v.trim()) && parseDuration(v.trim()) > 0
      ? void (c.discovery.model_discovery.interval = v.trim())
      : 'must be a duration above zero, such as 5m',
  // The standard OpenTelemetry variables (tracing, the GenAI conventions' names).
  ...OTEL_OVERRIDES,
};

/** A config value by dotted path ("translators.msgapi.enabled"), for YAML that names config keys. */
export function configValue(config: GatewayConfig, path: string): unknown {
  return valueAt(config, path);
}

function valueAt(from: unknown, path: string): unknown {
  let v = from;
  for (const key of path.split('.')) v = v && typeof v === 'object' ? (v as Record<string, unknown>)[key] : undefined;
  return v;
}

/** Each loaded config's file as written, before the schema's defaults were filled in. */
const written = new WeakMap<GatewayConfig, unknown>();

/** Did the config file set this key itself (dotted path), rather than take its default? A user's
 *  value beats a built-in profile's; a default does not (backends/endpoint-plans.ts). */
export function setInConfig(config: GatewayConfig, path: string): boolean {
  return valueAt(written.get(config), path) !== undefined;
}

export function deepFreeze<T>(value: T): T {
  if (value && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const v of Object.values(value)) deepFreeze(v);
  }
  return value;
}

/**
 * Load and check a configuration without throwing for problems in it: `problems` lists every
 * FAIL and WARN; `config` is present when nothing failed. `gw validate` prints these; serve refuses FAILs.
 */
export function checkConfig(file: string | null, env: NodeJS.ProcessEnv = process.env): { loaded?: LoadedConfig; problems: Problem[] } {
  const source = file ?? BUILTIN_DEFAULT;
  let raw: unknown;
  try {
    raw = file ? readYaml(file, `create it: copy config/config.example.yaml to ${file} and give it your endpoints, or name another file with --config`) : {};
  } catch (err) {
    if (err instanceof ConfigError) return { problems: [{ level: 'fail', field: err.field, message: err.problem, fix: err.fix }] };
    throw err;
  }
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) {
    return {
      problems: [
        {
          level: 'fail',
          field: '(top level)',
          message: 'the file must hold a YAML mapping of keys',
          fix: 'start with keys such as server:, proxy:, discovery:',
        },
      ],
    };
  }
  const problems = explain(checkStrict, structuredClone(raw));
  if (problems.some((p) => p.level === 'fail')) return { problems };
  const cfg = structuredClone(raw) as GatewayConfig;
  fillDefaults(cfg);
  // logging.level: environment, then file, then default; an invalid value warns and falls back.
  const fileLevel = normaliseLevel(cfg.logging.level);
  if (!fileLevel)
    problems.push({
      level: 'warn',
      field: 'logging.level',
      message: `${JSON.stringify(cfg.logging.level)} is not a log level; using info`,
      fix: 'use debug, info, warn or error',
    });
  cfg.logging.level = fileLevel ?? 'info';
  const given = raw as { proxy?: { profiles_dir?: unknown }; pipelines?: { dir?: unknown } };
  problems.push(...folderProblems('proxy.profiles_dir', cfg.proxy.profiles_dir, given.proxy?.profiles_dir !== undefined, 'profiles'));
  problems.push(...folderProblems('pipelines.dir', cfg.pipelines.dir, given.pipelines?.dir !== undefined, 'pipelines'));
  if (parseDuration(cfg.server.read_header_timeout) > parseDuration(cfg.server.read_timeout)) {
    problems.push({
      level: 'fail',
      field: 'server.read_header_timeout',
      message: `${cfg.server.read_header_timeout} is longer than server.read_timeout (${cfg.server.read_timeout}), which covers the head too`,
      fix: 'make read_header_timeout shorter than read_timeout',
    });
  }
  cfg.server.rate_limits.trusted_proxy_cidrs.forEach((text, i) => {
    const c = parseCidr(text);
    if (typeof c === 'string')
      problems.push({
        level: 'fail',
        field: `server.rate_limits.trusted_proxy_cidrs[${i}]`,
        message: `"${text}": ${c}`,
        fix: 'write a range such as 10.0.0.0/8 or fd00::/8, or one address',
      });
  });
  const redis = cfg.server.rate_limits.redis;
  const redisUrl = redisUrlProblem(redis.url);
  if (redisUrl)
    problems.push({
      level: 'fail',
      field: 'server.rate_limits.redis.url',
      message: redisUrl,
      fix: 'write redis://host:6379 (rediss:// for TLS); put the password in password_file rather than in the URL',
    });
  if (redis.password_file !== undefined) {
    try {
      readFileSync(resolve(redis.password_file), 'utf8');
    } catch (err) {
      problems.push({
        level: 'fail',
        field: 'server.rate_limits.redis.password_file',
        message: `cannot read ${redis.password_file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`,
        fix: 'name a file the gateway can read (a mounted secret)',
      });
    }
  }
  if (cfg.auth.keys_file !== undefined) {
    const fromFile = keysFromFile(resolve(cfg.auth.keys_file), (wrapped) => {
      const found = explain(checkStrict, structuredClone(wrapped));
      if (found.some((p) => p.level === 'fail')) return { problems: found };
      fillDefaults(wrapped);
      return { problems: found, keys: wrapped.auth.keys as KeysConfig['keys'] };
    });
    problems.push(...fromFile.problems);
    cfg.auth.keys = [...cfg.auth.keys, ...fromFile.keys];
  }
  problems.push(...keysProblems(cfg.auth));
  if (problems.some((p) => p.level === 'fail')) return { problems };
  for (const [name, apply] of Object.entries(ENV_OVERRIDES)) {
    const value = env[name];
    if (value === undefined) continue;
    const why = apply(cfg, value);
    const shown = SECRET_ENV.has(name) ? 'its value (not shown: it may hold a key)' : `environment value ${JSON.stringify(value)}`;
    if (why) problems.push({ level: 'warn', field: name, message: `${shown} ${why}; ignored, using the configured value` });
  }
  written.set(cfg, raw);
  return { loaded: { config: deepFreeze(cfg), source, problems }, problems };
}

/** A custom folder that is missing drops the user's customisations without a word: say so. The
 *  default folder may well not exist (nothing customised); a folder named explicitly should. */
function folderProblems(field: string, dir: string, explicit: boolean, what: string): Problem[] {
  const abs = resolve(dir);
  if (!existsSync(abs)) {
    return explicit
      ? [
          {
            level: 'warn',
            field,
            message: `folder ${abs} does not exist; no custom ${what} are loaded`,
            fix: `create it, or correct the path (relative paths resolve against the working directory, ${process.cwd()})`,
          },
        ]
      : [];
  }
  if (!statSync(abs).isDirectory()) return [{ level: 'fail', field, message: `${abs} is not a folder`, fix: `point ${field} at a folder of YAML files` }];
  return [];
}

/** For serving: the config, or a ConfigError naming the file, the field and the fix. */
export function loadConfig(file: string | null, env: NodeJS.ProcessEnv = process.env): LoadedConfig {
  const { loaded, problems } = checkConfig(file, env);
  if (!loaded) {
    const fails = problems.filter((p) => p.level === 'fail');
    const first = fails[0];
    const more = fails
      .slice(1)
      .map((p) => `\n  also ${p.field}: ${p.message}${p.fix ? ` — ${p.fix}` : ''}`)
      .join('');
    throw new ConfigError(file ?? BUILTIN_DEFAULT, first.field, first.message + more, first.fix);
  }
  return loaded;
}

/** What is wrong with a Redis URL, in words that never repeat it (it may hold a password). */
function redisUrlProblem(text: string): string | undefined {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return 'not a URL';
  }
  if (url.protocol !== 'redis:' && url.protocol !== 'rediss:') return 'the scheme must be redis: or rediss:';
  if (!url.hostname) return 'no host';
  const port = url.port === '' ? 6379 : Number(url.port);
  if (!Number.isInteger(port) || port < 1 || port > 65535) return 'the port must be 1-65535';
  const db = url.pathname.replace(/^\//, '');
  if (db !== '' && !/^\d+$/.test(db)) return 'the path must be a database number, such as /0';
  return undefined;
}
