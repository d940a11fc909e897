// Pipelines → one compiled graph: a find-my-way router whose routes hold their pipeline's hooks,
// with every plugin applied once. Options are validated here, never per request. A graph is
// built whole and swapped in by one reference, so in-flight requests finish on the graph they began on.
import FindMyWay, { type HTTPMethod } from 'find-my-way';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { configValue } from './config.js';
import type { RouteInfo } from './context.js';
import { createHooks, type Hooks } from './hooks.js';
import type { PipelineDef } from './pipelines.js';
import type { PluginEnv, PluginRegistry } from './plugin.js';
import type { Profile } from './profiles.js';
import type { Runtime } from './runtime.js';
import { closest, explain, type Problem } from './schema.js';

export type RouteRunner = (route: RouteInfo, req: IncomingMessage, res: ServerResponse) => void;

export interface Graph {
  router: FindMyWay.Instance<FindMyWay.HTTPVersion.V1>;
  routes: { method: string; path: string; pipeline: string }[];
}

export interface CompileResult {
  graph?: Graph;
  /** Problems per pipeline file. */
  problems: { file: string; pipeline: string; problems: Problem[] }[];
}

interface Applied {
  hooks: Hooks;
}

function mountedPrefixes(profile: Profile, runtime: Runtime): string[] {
  return runtime.config.proxy.enable_optional_prefixes ? [...profile.routing.prefixes, ...profile.routing.optional_prefixes] : profile.routing.prefixes;
}

/** Check the steps of one pipeline: known plugins, valid options, exactly one terminal. */
function checkSteps(def: PipelineDef, registry: PluginRegistry): { problems: Problem[]; options: Record<string, unknown>[] } {
  const problems: Problem[] = [];
  const options: Record<string, unknown>[] = [];
  const terminals: string[] = [];
  def.steps.forEach((step, i) => {
    const reg = registry.get(step.use);
    if (!reg) {
      const guess = closest(step.use, registry.names());
      problems.push({ level: 'fail', field: `/steps/${i}/use`, message: `unknown plugin "${step.use}"`, fix: guess ? `did you mean "${guess}"?` : `built-in and loaded plugins: ${registry.names().sort().join(', ')}; third-party plugins are listed under plugins: in the config` });
      options.push({});
      return;
    }
    const opts = structuredClone(step.with ?? {});
    problems.push(...explain(reg.validate, opts, `/steps/${i}/with`).map((p) => ({ ...p, level: 'fail' as const, message: `${step.use}: ${p.message}` })));
    options.push(opts);
    if (reg.plugin.terminal) terminals.push(`${step.use} (/steps/${i})`);
    if (reg.plugin.needsProfile && !def.mount.per_profile) {
      problems.push({ level: 'fail', field: `/steps/${i}/use`, message: `${step.use} works on a backend family and needs mount.per_profile: true` });
    }
  });
  if (terminals.length !== 1) {
    problems.push({
      level: 'fail', field: '/steps',
      message: terminals.length === 0 ? 'no terminal step: nothing answers the request' : `${terminals.length} terminal steps: ${terminals.join(', ')}`,
      fix: 'a pipeline has exactly one terminal step (forward, translate, a status report…)',
    });
  }
  return { problems, options };
}

function applySteps(def: PipelineDef, registry: PluginRegistry, options: Record<string, unknown>[], env: PluginEnv): Applied {
  const hooks = createHooks();
  def.steps.forEach((step, i) => registry.get(step.use)!.plugin.apply(hooks, options[i], env));
  return { hooks };
}

export function compileGraph(pipelines: readonly PipelineDef[], registry: PluginRegistry, runtime: Runtime, run: RouteRunner): CompileResult {
  const router = FindMyWay({ ignoreTrailingSlash: false, caseSensitive: true });
  const routes: Graph['routes'] = [];
  const owner = new Map<string, string>();
  const problems: CompileResult['problems'] = [];
  const handler = (req: IncomingMessage, res: ServerResponse, _params: unknown, store: unknown) => run(store as RouteInfo, req, res);

  for (const def of pipelines) {
    if (def.mount.enabled_by && configValue(runtime.config, def.mount.enabled_by) !== true) continue;
    const { problems: stepProblems, options } = checkSteps(def, registry);
    const entry = { file: def.file, pipeline: def.name, problems: stepProblems };
    problems.push(entry);
    if (stepProblems.some((p) => p.level === 'fail')) continue;

    const mount = (path: string, info: RouteInfo) => {
      for (const method of def.mount.methods) {
        const key = `${method} ${path}`;
        const other = owner.get(key);
        if (other) {
          entry.problems.push({ level: 'fail', field: '/mount', message: `route ${key} is already mounted by pipeline ${other}`, fix: 'give each route to one pipeline' });
          continue;
        }
        owner.set(key, def.name);
        router.on(method as HTTPMethod, path, handler, info);
        routes.push({ method, path, pipeline: def.name });
      }
    };
    try {
      if (def.mount.per_profile) {
        for (const profile of runtime.profiles.list) {
          const { hooks } = applySteps(def, registry, options, { ...runtime, pipeline: def.name, profile });
          for (const p of mountedPrefixes(profile, runtime)) {
            const prefix = `/gw/${p}`;
            const info: RouteInfo = { pipeline: def.name, hooks, profile, prefix, errorFormat: def.error_format };
            mount(prefix, info);
            mount(`${prefix}/*`, info);
          }
        }
      }
      if (def.mount.paths.length) {
        const { hooks } = applySteps(def, registry, options, { ...runtime, pipeline: def.name });
        for (const path of def.mount.paths) mount(path, { pipeline: def.name, hooks, errorFormat: def.error_format });
      }
    } catch (err) {
      entry.problems.push({ level: 'fail', field: '/steps', message: `a plugin failed to apply: ${(err as Error).message}` });
    }
  }
  if (problems.some((p) => p.problems.some((q) => q.level === 'fail'))) return { problems };
  return { graph: { router, routes }, problems };
}
