// Pipelines → one compiled graph: a find-my-way router whose routes hold their pipeline's hooks,
// with every plugin applied once. Each pipeline's steps are the shared ones wrapped around its
// own; options are validated and the YAML order checked here, never per request. A graph is
// built whole and swapped in by one reference, so in-flight requests finish on the graph they began on.
import FindMyWay, { type HTTPMethod } from 'find-my-way';
import type { IncomingMessage } from 'node:http';
import { modelKeys as modelKeysOf } from '../core/body-model.js';
import { configValue } from '../core/config.js';
import { ErrorFormatPaths } from '../core/error-formats.js';
import { familyPath } from '../core/family-paths.js';
import type { RouteInfo } from './context.js';
import { createHooks, HOOK_PHASES, type Hooks } from './hooks.js';
import { nameMatches, type PipelineDef, type PipelineLoad, type SharedStepDef, type StepDef } from '../core/pipelines.js';
import { factsOf, type PluginEnv, type PluginRegistry } from './plugin.js';
import { mountedPrefixes, type Profile } from '../core/profiles.js';
import type { GatewayResponse } from './response.js';
import type { RouteRunner } from './run.js';
import type { Runtime } from './runtime.js';
import { closest, explain, type Problem } from '../core/schema.js';

export interface Graph {
  router: FindMyWay.Instance<FindMyWay.HTTPVersion.V1>;
  routes: { method: string; path: string; pipeline: string }[];
}

export interface CompileResult {
  graph?: Graph;
  /** Problems per pipeline file. */
  problems: { file: string; pipeline: string; problems: Problem[] }[];
}

/** A step in its place: where it was declared, for messages that point at it. */
interface Placed {
  step: StepDef;
  /** "match-prefix (/steps/1)", "cors (shared steps /before/0)". */
  label: string;
  field: string;
  /** A shared step wraps pipelines of every kind: what it needs, it only uses. */
  shared: boolean;
  options: Record<string, unknown>;
}

const stepOf = (s: SharedStepDef): StepDef => (typeof s === 'string' ? { use: s } : { use: s.use, with: s.with });

function appliesTo(s: SharedStepDef, pipeline: string): boolean {
  if (typeof s === 'string') return true;
  if (s.only && !s.only.some((p) => nameMatches(p, pipeline))) return false;
  return !(s.except ?? []).some((p) => nameMatches(p, pipeline));
}

// The field of a shared step's problem says where it is written: the config's pipelines.before /
// after, or the shared steps file.
const CONFIG_STEP = 'config ';
const SHARED_STEP = 'shared steps ';

/** Where a step problem is written: the pipeline's file, or for a shared step (which wraps every
 *  pipeline and so fails the same way in each) the config or the shared steps file. */
export function writtenIn(field: string, pipelineFile: string, load: PipelineLoad, configSource: string): { file: string; field: string; shared: boolean } {
  if (field.startsWith(CONFIG_STEP)) return { file: configSource, field: field.slice(CONFIG_STEP.length), shared: true };
  if (field.startsWith(SHARED_STEP)) return { file: load.shared.file, field: field.slice(SHARED_STEP.length), shared: true };
  return { file: pipelineFile, field, shared: false };
}

/** The pipeline's steps wrapped in the shared ones (built-in first, then the config's); a shared
 *  step whose plugin the pipeline lists itself gives way to it. */
function compose(def: PipelineDef, load: PipelineLoad, config: Runtime['config']): Omit<Placed, 'options'>[] {
  const own = new Set(def.steps.map((s) => s.use));
  const wrap = (list: SharedStepDef[], where: (i: number) => string) =>
    list.flatMap((s, i) => {
      if (!appliesTo(s, def.name)) return [];
      const step = stepOf(s);
      if (own.has(step.use)) return [];
      own.add(step.use);
      return [{ step, field: where(i), label: `${step.use} (${where(i)})`, shared: true }];
    });
  const builtInBefore = wrap(load.shared.before, (i) => `${SHARED_STEP}/before/${i}`);
  const configBefore = wrap(config.pipelines.before, (i) => `${CONFIG_STEP}pipelines.before[${i}]`);
  const steps = def.steps.map((step, i) => ({ step, field: `/steps/${i}`, label: `${step.use} (/steps/${i})`, shared: false }));
  const configAfter = wrap(config.pipelines.after, (i) => `${CONFIG_STEP}pipelines.after[${i}]`);
  const builtInAfter = wrap(load.shared.after, (i) => `${SHARED_STEP}/after/${i}`);
  return [...builtInBefore, ...configBefore, ...steps, ...configAfter, ...builtInAfter];
}

/** Known plugins, valid options, exactly one terminal, per-profile plugins on per-profile mounts. */
function checkSteps(def: PipelineDef, steps: Omit<Placed, 'options'>[], registry: PluginRegistry): { problems: Problem[]; placed: Placed[] } {
  const problems: Problem[] = [];
  const placed: Placed[] = [];
  const terminals: string[] = [];
  for (const s of steps) {
    const reg = registry.get(s.step.use);
    if (!reg) {
      const fix = unknownPluginFix(s.step.use, registry);
      problems.push({
        level: 'fail',
        field: `${s.field}/use`,
        message: `unknown plugin "${s.step.use}"`,
        fix,
        consequence: fix.endsWith(NOT_LOADED) || undefined,
      });
      continue;
    }
    const options = structuredClone(s.step.with ?? {});
    problems.push(...explain(reg.validate, options, `${s.field}/with`).map((p) => ({ ...p, level: 'fail' as const, message: `${s.step.use}: ${p.message}` })));
    placed.push({ ...s, options });
    if (reg.plugin.terminal) terminals.push(s.label);
    if (reg.plugin.needsProfile && !def.mount.per_profile) {
      problems.push({ level: 'fail', field: `${s.field}/use`, message: `${s.step.use} works on a backend family and needs mount.per_profile: true` });
    }
  }
  if (terminals.length !== 1) {
    problems.push({
      level: 'fail',
      field: '/steps',
      message: terminals.length === 0 ? 'no terminal step: nothing answers the request' : `${terminals.length} terminal steps: ${terminals.join(', ')}`,
      fix: 'a pipeline has exactly one terminal step (forward, translate, a status report…)',
    });
  }
  return { problems, placed };
}

const NOT_LOADED = ' did not load (see above); fix that first';

/** A misspelling gets the closest name; a step whose plugin did not load points at that failure,
 *  reported once above, rather than listing every plugin there is. */
function unknownPluginFix(name: string, registry: PluginRegistry): string {
  const guess = closest(name, registry.names());
  if (guess) return `did you mean "${guess}"?`;
  if (registry.failed.length) return `${registry.failed.map((f) => `plugins[${f.index}] ${f.spec}`).join(', ')}${NOT_LOADED}`;
  return 'no built-in or loaded plugin has this name: check the spelling (docs/reference/pipelines-and-plugins.md, "Built-in steps"), or list the file that provides it under plugins: in the config';
}

/** YAML order is the order steps run: a step comes after the steps whose facts it needs (or
 *  uses). `given` are facts the route has before any step (a path mount's path is its own). */
function checkFacts(placed: Placed[], registry: PluginRegistry, given: readonly string[]): Problem[] {
  const problems: Problem[] = [];
  const providerOf = new Map<string, { index: number; label: string }>();
  for (const fact of given) providerOf.set(fact, { index: -1, label: 'the route' });
  placed.forEach((p, index) => {
    for (const fact of factsOf(registry.get(p.step.use)!.plugin.provides, p.options))
      if (!providerOf.has(fact)) providerOf.set(fact, { index, label: p.label });
  });
  placed.forEach((p, index) => {
    const plugin = registry.get(p.step.use)!.plugin;
    const check = (fact: string, hard: boolean) => {
      const provider = providerOf.get(fact);
      if (provider && provider.index < index) return;
      if (provider) {
        problems.push({
          level: 'fail',
          field: p.field,
          message: `${p.step.use} ${hard ? 'needs' : 'uses'} ${fact}, which ${provider.label} provides only later`,
          fix: `move ${provider.label.split(' ')[0]} above ${p.step.use}: YAML order is the order steps run`,
        });
      } else if (hard) {
        const candidates = registry.names().filter((n) => factsOf(registry.get(n)!.plugin.provides, {} as never).includes(fact));
        problems.push({
          level: 'fail',
          field: p.field,
          message: `${p.step.use} needs ${fact}, which no earlier step provides`,
          fix: candidates.length ? `add ${candidates.join(' or ')} above it` : `add a step that provides ${fact} above it`,
        });
      }
    };
    for (const fact of factsOf(plugin.needs, p.options)) check(fact, !p.shared);
    for (const fact of factsOf(plugin.uses, p.options)) check(fact, false);
  });
  return problems;
}

/** Apply the steps to fresh hooks; each step's phase is the earliest hook it tapped. */
function applySteps(placed: Placed[], registry: PluginRegistry, env: PluginEnv): { hooks: Hooks; phases: (number | undefined)[] } {
  const hooks = createHooks();
  const phases = placed.map((p) => {
    const before = HOOK_PHASES.map(({ hook }) => hooks[hook].taps.length);
    registry.get(p.step.use)!.plugin.apply(hooks, p.options, env);
    const tapped = HOOK_PHASES.findIndex(({ hook }, i) => hooks[hook].taps.length > before[i]);
    return tapped < 0 ? undefined : tapped;
  });
  return { hooks, phases };
}

/** A step listed after one that runs in a later phase would run out of its YAML order. Shared
 *  steps are placed by the gateway, not by the pipeline's author: they are checked among
 *  themselves, the pipeline's own steps among themselves. */
function checkPhases(placed: Placed[], phases: (number | undefined)[]): Problem[] {
  const problems: Problem[] = [];
  const latest = new Map<boolean, { phase: number; label: string }>();
  placed.forEach((p, i) => {
    const phase = phases[i];
    if (phase === undefined) return;
    const before = latest.get(p.shared);
    if (before && phase < before.phase) {
      problems.push({
        level: 'fail',
        field: p.field,
        message: `${p.step.use} runs in the ${HOOK_PHASES[phase].name} phase, but is listed after ${before.label}, which runs later (${HOOK_PHASES[before.phase].name})`,
        fix: `move ${p.step.use} above ${before.label.split(' ')[0]}: YAML order is the order steps run`,
      });
    }
    if (!before || phase >= before.phase) latest.set(p.shared, { phase, label: p.label });
  });
  return problems;
}

/** Which per-profile pipeline serves which family: one naming it in mount.families, else the one
 *  naming none. A pipeline that fills one route claims nothing: it serves the families (of its
 *  list, if it has one) whose engine lacks that route. */
function familyClaims(
  pipelines: readonly PipelineDef[],
  profiles: readonly Profile[],
  report: (def: PipelineDef, p: Problem) => void,
): Map<PipelineDef, Profile[]> {
  const claimed = new Map<string, PipelineDef>();
  const out = new Map<PipelineDef, Profile[]>();
  const names = profiles.map((p) => p.name);
  for (const def of pipelines) {
    for (const family of def.mount.per_profile ? (def.mount.families ?? []) : []) {
      if (def.mount.fills && names.includes(family)) continue;
      if (!names.includes(family)) {
        const guess = closest(family, names);
        report(def, {
          level: 'fail',
          field: '/mount/families',
          message: `unknown family "${family}"`,
          fix: guess ? `did you mean "${guess}"?` : `families: ${names.join(', ')}`,
        });
        continue;
      }
      const other = claimed.get(family);
      if (other && other !== def)
        report(def, {
          level: 'fail',
          field: '/mount/families',
          message: `family ${family} is already claimed by pipeline ${other.name} (${other.file})`,
          fix: 'give each family to one specialised pipeline',
        });
      claimed.set(family, def);
    }
  }
  for (const def of pipelines) {
    if (!def.mount.per_profile) continue;
    const { fills, families } = def.mount;
    if (fills)
      out.set(
        def,
        profiles.filter((p) => (!families || families.includes(p.name)) && familyPath(p, fills) === undefined),
      );
    else out.set(def, families ? profiles.filter((p) => claimed.get(p.name) === def) : profiles.filter((p) => !claimed.has(p.name)));
  }
  return out;
}

export function compileGraph(load: PipelineLoad, registry: PluginRegistry, runtime: Runtime, run: RouteRunner): CompileResult {
  const router = FindMyWay({ ignoreTrailingSlash: false, caseSensitive: true });
  const routes: Graph['routes'] = [];
  const owner = new Map<string, string>();
  const results = new Map<PipelineDef, CompileResult['problems'][number]>();
  const entryOf = (def: PipelineDef) => {
    let e = results.get(def);
    if (!e) results.set(def, (e = { file: def.file, pipeline: def.name, problems: [] }));
    return e;
  };
  const handler = (req: IncomingMessage, res: unknown, _params: unknown, store: unknown) => run(store as RouteInfo, req, res as GatewayResponse);
  const enabled = load.pipelines.filter((def) => !def.mount.enabled_by || configValue(runtime.config, def.mount.enabled_by) === true);
  const claims = familyClaims(enabled, runtime.profiles.list, (def, p) => entryOf(def).problems.push(p));

  for (const def of enabled) {
    const entry = entryOf(def);
    const { problems, placed } = checkSteps(def, compose(def, load, runtime.config), registry);
    entry.problems.push(...problems);
    if (problems.some((p) => p.level === 'fail')) continue;
    entry.problems.push(...checkFacts(placed, registry, def.mount.per_profile ? [] : ['path']));
    if (entry.problems.some((p) => p.level === 'fail')) continue;

    const mount = (path: string, info: RouteInfo) => {
      for (const method of def.mount.methods) {
        const key = `${method} ${path}`;
        const other = owner.get(key);
        if (other) {
          entry.problems.push({
            level: 'fail',
            field: '/mount',
            message: `route ${key} is already mounted by pipeline ${other}`,
            fix: 'give each route to one pipeline',
          });
          continue;
        }
        owner.set(key, def.name);
        router.on(method as HTTPMethod, path, handler, info);
        routes.push({ method, path, pipeline: def.name });
      }
    };
    const route = (hooks: Hooks, extra: Partial<RouteInfo> = {}): RouteInfo => ({
      pipeline: def.name,
      hooks,
      errorFormat: def.error_format,
      log: runtime.log,
      ...extra,
    });
    try {
      let phasesChecked = false;
      const applied = (env: PluginEnv) => {
        const { hooks, phases } = applySteps(placed, registry, env);
        if (!phasesChecked) {
          phasesChecked = true;
          entry.problems.push(...checkPhases(placed, phases));
        }
        return hooks;
      };
      for (const profile of claims.get(def) ?? []) {
        const hooks = applied({ ...runtime, pipeline: def.name, profile });
        const modelKeys = modelKeysOf(profile.request.model_field_paths);
        const formats = new ErrorFormatPaths(profile.api.error_formats);
        const errorFormats = formats.empty ? undefined : formats;
        for (const p of mountedPrefixes(profile, runtime.config.proxy.enable_optional_prefixes)) {
          const prefix = `/gw/${p}`;
          const info = route(hooks, { profile, prefix, modelKeys, errorFormats });
          if (def.mount.fills) {
            mount(prefix + def.mount.fills, info);
            continue;
          }
          mount(prefix, info);
          mount(`${prefix}/*`, info);
        }
      }
      if (def.mount.paths.length) {
        const info = route(applied({ ...runtime, pipeline: def.name }));
        for (const path of def.mount.paths) mount(path, info);
      }
    } catch (err) {
      entry.problems.push({ level: 'fail', field: '/steps', message: `a plugin failed to apply: ${(err as Error).message}` });
    }
  }
  const problems = [...results.values()];
  if (problems.some((p) => p.problems.some((q) => q.level === 'fail'))) return { problems };
  return { graph: { router, routes }, problems };
}
