// Backend profiles: the built-in families in profiles/*.yaml, then custom ones from
// proxy.profiles_dir; a custom profile with a built-in's `name` replaces it completely.
import { existsSync, readdirSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { deepFreeze, type ContinuationConfig } from './config.js';
import { ConfigError, type ErrorFormat } from './errors.js';
import { BUILTIN_PROFILES_DIR } from './paths.js';
import { editDistance, explain, validatorOf, type Problem } from './schema.js';
import { readYaml } from './yaml-file.js';

/** How an engine continues an answer on one route: the API the route speaks (plugins/apis/continuation/). */
export type ContinuationKind = 'chat' | 'completions' | 'messages' | 'ollama_chat' | 'ollama_generate' | 'llama_completion';

/** One route where an engine reports its load, and how to read it. */
export interface LoadSource {
  path: string;
  format: 'prometheus' | 'llamacpp_slots';
  /** prometheus: the gauges summed as running and as waiting requests. */
  running?: string[];
  waiting?: string[];
}

export interface Profile {
  name: string;
  type_aliases: string[];
  version: string;
  display_name?: string;
  description?: string;
  /** The servers this family is for, by their own names ("llama.cpp server (llama-server)"). */
  engines: string[];
  routing: { prefixes: string[]; optional_prefixes: string[]; engine_prefixes: string[] };
  api: {
    openai_compatible: boolean;
    msgapi_support?: { enabled: boolean; messages_path: string; token_count: boolean; min_version?: string; limitations: string[] };
    paths: string[];
    forward_all: boolean;
    unsupported_paths: string[];
    replay_safe_paths: string[];
    intercepts: Intercept[];
    model_discovery_path?: string;
    /** Per-model details (Ollama's /api/show): context windows the list lacks. */
    model_info_path?: string;
    /** What the backend has loaded now (localrunner api/ps, mlxmulti v1/models/status): read
     *  after each passing health check (backends/residency.ts). */
    residency_path?: string;
    /** Where the engine reports its running and waiting requests (backends/engine-load.ts). */
    load_report?: LoadSource[];
    health_check_path?: string;
    metrics_path?: string;
    /** The paths whose gateway-made errors take another shape than the route's (core/error-formats.ts). */
    error_formats: Partial<Record<ErrorFormat, string[]>>;
    /** What backend error replies gain (engine-agnostic; plugins/replies/error-context.ts). */
    error_context: { gw_context: boolean; integer_code: boolean; provider: boolean };
    /** X-Radix-Cache-Hit / X-Radix-Spec-Decode on replies (plugins/replies/radix-headers.ts). */
    radix_headers: boolean;
    /** How the engine continues a partly streamed answer, per route (plugins/apis/continuation/);
     *  a route not named cannot be continued. */
    continuation: { routes: Record<string, ContinuationKind>; chat_fields?: Record<string, unknown>; note?: string };
  };
  characteristics: {
    timeout?: string;
    max_concurrent_requests?: number;
    max_queued_requests: number;
    queue_timeout: string;
    default_priority: number;
    streaming_support: boolean;
    /** A hosted API service rather than an engine you run (plugins/apis/msgapi/billing.ts). */
    hosted_service: boolean;
    /** Its endpoints take server.rate_limits.per_endpoint.default_requests_per_minute (hosted quotas). */
    endpoint_rate_limit: boolean;
    /** Failover settings (precedence: backends/endpoint-plans.ts). */
    retry_on_statuses?: number[];
    stream_idle_timeout?: string;
    first_token_timeout?: string;
    cold_first_token_timeout?: string;
    continuation?: Partial<ContinuationConfig>;
  };
  /** `passing`: which health-check answers mean alive — 2xx, or any below 500 (`auto`: a generic
   *  server may have nothing at its health path, and its 404 still says it is there). */
  health: { transient_statuses: number[]; passing: '2xx' | 'below_500' };
  request: {
    /** Routes that stream when the body does not say `stream` (Ollama's native ones). */
    stream_default_paths: string[];
    /** Top-level body fields the model is read from, first present wins. */
    model_field_paths: string[];
    /** Routes that need a generation model, an embedding model; model-management routes. */
    generation_paths: string[];
    embedding_paths: string[];
    management_paths: string[];
    response_format: string;
    forward_host_headers: boolean;
    supports_top_k: boolean;
    stream_usage: boolean;
    /** The reasoning_effort levels the chat route accepts. */
    reasoning_effort: string[];
    parsing_rules?: { chat_completions_path?: string; completions_path?: string; model_field_name?: string; supports_streaming?: boolean };
  };
  models: {
    name_format?: string;
    /** Names may carry a provider prefix (provider/model): matched in full, then without it. */
    provider_prefixed: boolean;
    /** The tag a name without one stands for, as the engine reads it (Ollama: latest). */
    default_tag?: string;
    capability_patterns: { vision?: string[]; embeddings?: string[]; code?: string[] };
    context_patterns: { pattern: string; context: number }[];
  };
  path_indices?: Record<string, number>;
  /** Informational: validated and shown, not acted on. */
  features?: { metrics?: { enabled?: boolean; prefix?: string }; tokenization?: { enabled?: boolean; endpoints?: string[] } };
  /** The file it was loaded from. */
  source: string;
}

/** A model-listing route the gateway answers itself (api.intercepts). */
export interface Intercept {
  path: string;
  format: 'common' | 'npuengine' | 'localrunner' | 'deskrunner' | 'deskrunner-legacy' | 'pagedengine';
  context_field?: string;
  fields: string[];
  /** Ask every routable endpoint and concatenate this array of their replies (api/ps). */
  merge?: string;
}

export interface ProfileSet {
  list: readonly Profile[];
  byName: ReadonlyMap<string, Profile>;
  /** Endpoint `type` token (name or alias) → profile. */
  byType: ReadonlyMap<string, Profile>;
}

export interface ProfileLoad {
  profiles?: ProfileSet;
  /** One entry per file, with its problems (empty when it passed). */
  files: { file: string; name?: string; problems: Problem[]; replaces?: string; notes?: string[] }[];
}

const validate = validatorOf('profile', { useDefaults: true });

function yamlFiles(dir: string): string[] {
  return readdirSync(dir)
    .filter((f) => /\.ya?ml$/.test(f))
    .sort()
    .map((f) => join(dir, f));
}

const inModels = (p: Problem) => p.field === 'models' || p.field.startsWith('models.') || p.field.startsWith('models[');

/** Model patterns that cannot be read do not stop the gateway (the spec's rule for model-pattern
 *  files): when the `models` block is all that is wrong, its problems become warnings, the block
 *  is dropped (no patterns: what backends report, else the platform default) and the rest of
 *  the profile loads. */
function withoutBrokenPatterns(raw: unknown, problems: Problem[]): Problem[] {
  const fails = problems.filter((p) => p.level === 'fail');
  if (fails.length === 0 || !fails.every(inModels) || !raw || typeof raw !== 'object') return problems;
  const ignored = problems.filter(inModels).map(
    (p): Problem => ({
      ...p,
      level: 'warn',
      message: `${p.message}; the model patterns of this profile are ignored (capabilities and context windows come from what backends report, else the platform default)`,
    }),
  );
  delete (raw as Record<string, unknown>).models;
  return [...explain(validate, raw), ...ignored];
}

function loadOne(file: string): { profile?: Profile; problems: Problem[]; notes?: string[] } {
  let raw: unknown;
  try {
    raw = readYaml(file);
  } catch (err) {
    if (err instanceof ConfigError) return { problems: [{ level: 'fail', field: err.field, message: err.problem, fix: err.fix }] };
    throw err;
  }
  let problems = explain(validate, raw);
  problems = withoutBrokenPatterns(raw, problems);
  if (problems.some((p) => p.level === 'fail')) return { problems };
  const profile = raw as Profile;
  const api = profile.api;
  const unlisted = (field: string, paths: string[]) => {
    const missing = api.forward_all ? [] : paths.filter((p) => !api.paths.includes(p));
    if (missing.length)
      problems.push({
        level: 'warn',
        field,
        message: `${missing.join(', ')} not in api.paths: the allowlist refuses them anyway`,
        fix: 'add them to api.paths or remove them here',
      });
  };
  unlisted('api.replay_safe_paths', api.replay_safe_paths);
  for (const kind of ['generation_paths', 'embedding_paths', 'management_paths'] as const) unlisted(`request.${kind}`, profile.request[kind]);
  problems.push(...fieldProblems(profile));
  return { profile: { ...profile, source: file }, problems, notes: informational(profile) };
}

/** Fields the schema cannot check alone; each is either acted on or refused here with the fix. */
function fieldProblems(p: Profile): Problem[] {
  const problems: Problem[] = [];
  const fail = (field: string, message: string, fix: string) => problems.push({ level: 'fail', field, message, fix });
  const fields = p.request.model_field_paths;
  if (fields.length === 0)
    fail(
      'request.model_field_paths',
      'is empty: no request of this family could be routed by its model',
      'list the top-level body field that names the model, e.g. [model]',
    );
  fields.forEach((f, i) => {
    if (!TOP_LEVEL_FIELD.test(f))
      fail(
        `request.model_field_paths[${i}]`,
        `${JSON.stringify(f)} is not a top-level field name: the gateway reads the model from top-level body fields only (nested paths are not supported)`,
        'name a top-level field such as model',
      );
  });
  const format = p.models.name_format;
  if (format !== undefined && !NAME_FORMATS.includes(format)) {
    fail(
      'models.name_format',
      `template ${JSON.stringify(format)} is not supported: the gateway shows model names exactly as the backend lists them`,
      `use ${NAME_FORMATS.map((f) => JSON.stringify(f)).join(' or ')} (both mean the listed name), or remove the field`,
    );
  }
  const last = p.api.paths.length - 1;
  for (const [name, index] of Object.entries(p.path_indices ?? {})) {
    if (index > last)
      fail(
        `path_indices.${name}`,
        `index ${index} is outside api.paths, which has ${p.api.paths.length} entr${p.api.paths.length === 1 ? 'y' : 'ies'}`,
        last < 0 ? 'api.paths is empty: remove path_indices or list the paths' : `use an index from 0 to ${last}`,
      );
  }
  const shapes = new Map<string, string>();
  for (const [format, paths] of Object.entries(p.api.error_formats)) {
    for (const path of paths ?? []) {
      const other = shapes.get(path);
      if (other) fail(`api.error_formats.${format}`, `${path} is also in api.error_formats.${other}`, 'a path answers errors in one shape: list it once');
      shapes.set(path, format);
    }
  }
  const kinds = new Map<string, string>();
  for (const kind of ['generation_paths', 'embedding_paths', 'management_paths'] as const) {
    for (const path of p.request[kind]) {
      const other = kinds.get(path);
      if (other) fail(`request.${kind}`, `${path} is also in request.${other}`, 'a route needs one kind of model (or is model management): list it once');
      kinds.set(path, kind);
    }
  }
  return problems;
}

const TOP_LEVEL_FIELD = /^[A-Za-z_][A-Za-z0-9_-]*$/;
/** Both show the name as listed: a containerrunner lists `<namespace>/<name>` already. */
const NAME_FORMATS = ['{{.Name}}', '{{.Namespace}}/{{.Name}}'];

/** What gw validate says of fields the gateway accepts but does not act on. */
function informational(p: Profile): string[] {
  const on = Object.entries(p.features ?? {})
    .filter(([, f]) => f?.enabled)
    .map(([name]) => `features.${name}`);
  return on.length ? [`${on.join(', ')} informational: the gateway does not act on ${on.length === 1 ? 'it' : 'them'}`] : [];
}

/** Never throws for bad profile files: every file gets a line of problems; `profiles` is absent when any failed. */
export function checkProfiles(customDir: string): ProfileLoad {
  const files: ProfileLoad['files'] = [];
  const byName = new Map<string, Profile>();
  const load = (file: string, custom: boolean) => {
    const { profile, problems, notes } = loadOne(file);
    const entry: ProfileLoad['files'][number] = { file, name: profile?.name, problems, notes };
    files.push(entry);
    if (!profile) return;
    const existing = byName.get(profile.name);
    if (existing && !custom) {
      problems.push({
        level: 'fail',
        field: 'name',
        message: `profile name "${profile.name}" is also used by ${existing.source}`,
        fix: 'give each built-in profile its own name',
      });
    }
    if (existing && custom) entry.replaces = existing.source;
    byName.set(profile.name, profile);
  };
  for (const f of yamlFiles(BUILTIN_PROFILES_DIR)) load(f, false);
  const dir = resolve(customDir);
  if (existsSync(dir)) for (const f of yamlFiles(dir)) load(f, true);

  const byType = new Map<string, Profile>();
  const prefixOwner = new Map<string, Profile>();
  for (const p of byName.values()) {
    const entry = files.find((f) => f.file === p.source)!;
    for (const token of [p.name, ...p.type_aliases]) {
      const other = byType.get(token);
      if (other && other !== p)
        entry.problems.push({
          level: 'fail',
          field: 'type_aliases',
          message: `type "${token}" is already claimed by profile ${other.name} (${other.source})`,
          fix: 'remove it from one of the two profiles (a copy of a built-in profile made into a family of its own keeps its type_aliases: give the copy its own, or none)',
        });
      byType.set(token, p);
    }
    for (const prefix of [...p.routing.prefixes, ...p.routing.optional_prefixes, ...p.routing.engine_prefixes]) {
      const other = prefixOwner.get(prefix);
      if (other && other !== p)
        entry.problems.push({
          level: 'fail',
          field: 'routing.prefixes',
          message: `prefix "${prefix}" is already used by profile ${other.name} (${other.source})`,
          fix: 'each prefix may name one family only',
        });
      prefixOwner.set(prefix, p);
    }
  }
  if (files.some((f) => f.problems.some((p) => p.level === 'fail'))) return { files };
  const list = [...byName.values()].map((p) => deepFreeze(p));
  return { files, profiles: { list, byName, byType } };
}

/** The prefixes a family is served under, /gw/<prefix>/: its own, the engines' names (/gw/ollama/)
 *  and, with proxy.enable_optional_prefixes, the optional ones. */
export function mountedPrefixes(p: Profile, enableOptional: boolean): string[] {
  const { prefixes, engine_prefixes, optional_prefixes } = p.routing;
  return [...prefixes, ...engine_prefixes, ...(enableOptional ? optional_prefixes : [])];
}

/** One of the profiles shipped with the gateway (not a custom one from proxy.profiles_dir): its
 *  settings are defaults that a user's proxy settings beat. */
export const isBuiltIn = (p: Profile): boolean => dirname(p.source) === BUILTIN_PROFILES_DIR;

/** A warning about a profile file, for the log. */
export interface FileProblem extends Problem {
  file: string;
}

export function loadProfiles(customDir: string): ProfileSet {
  return loadProfilesReporting(customDir).profiles;
}

/** The profiles, and the warnings their files raised (logged at start and on reload). */
export function loadProfilesReporting(customDir: string): { profiles: ProfileSet; warnings: FileProblem[] } {
  const { profiles, files } = checkProfiles(customDir);
  if (profiles) return { profiles, warnings: files.flatMap((f) => f.problems.map((p) => ({ ...p, file: f.file }))) };
  const bad = files.find((f) => f.problems.some((p) => p.level === 'fail'))!;
  const fail = bad.problems.find((p) => p.level === 'fail')!;
  throw new ConfigError(bad.file, fail.field, fail.message, fail.fix);
}

/** Lower case, letters and digits only: "llama.cpp server" and "LlamaCpp" meet as llamacppserver, llamacpp. */
const squash = (text: string) => text.toLowerCase().replace(/[^a-z0-9]/g, '');

/** A family and the servers it is for, as messages name it: `"cppengine" (llama.cpp server (llama-server))`;
 *  its type aliases too when asked (`"hosted-compatible"/"hosted" (…)`). */
export function familyLabel(p: Profile, aliases = false): string {
  const names = (aliases ? [p.name, ...p.type_aliases] : [p.name]).map((n) => `"${n}"`).join('/');
  return p.engines.length ? `${names} (${p.engines.join(', ')})` : names;
}

/** The families an unknown endpoint `type` most likely means, matched against each family's name,
 *  type aliases and engines (llamacpp → cppengine, vllm → pagedengine, ollama → localrunner): a
 *  name that contains the other (either way), else a near spelling. Best first; empty when none. */
export function suggestFamilies(type: string, set: ProfileSet): Profile[] {
  const word = squash(type);
  if (word.length < 3) return [];
  const allowed = Math.max(1, Math.min(3, Math.floor(word.length / 3)));
  const scored: { p: Profile; score: number }[] = [];
  for (const p of set.list) {
    // Engine names in parts: "llama.cpp server (llama-server)" → llama.cpp server, llama-server.
    const names = [p.name, ...p.type_aliases, ...p.engines.flatMap((e) => e.split(/[(),/]/))].map(squash).filter((n) => n.length >= 3);
    let score = Infinity;
    for (const n of names) {
      if (n === word) score = 0;
      else if (n.includes(word) || (n.length >= 4 && word.includes(n))) score = Math.min(score, 1);
      else {
        const d = editDistance(word, n);
        if (d <= allowed) score = Math.min(score, 1 + d);
      }
    }
    if (score < Infinity) scored.push({ p, score });
  }
  return scored
    .sort((a, b) => a.score - b.score)
    .slice(0, 3)
    .map((s) => s.p);
}
