// Everything a graph is built from, loaded and checked in one place for start, reload and
// `gw validate`: the config, the profiles, the endpoint plans, the plugins (built-ins as given,
// third-party ones imported) and the pipelines. Nothing here touches the backends' state.
import type { EndpointPlan } from '../backends/endpoint-plans.js';
import { planEndpoints } from '../backends/endpoint-plans.js';
import { compileGraph, writtenIn, type Graph } from './compile.js';
import { loadConfig, type GatewayConfig } from '../core/config.js';
import { ConfigError } from '../core/errors.js';
import { checkPipelines, type PipelineLoad } from '../core/pipelines.js';
import { PluginRegistry, type Plugin } from './plugin.js';
import { loadProfilesReporting, type FileProblem, type ProfileSet } from '../core/profiles.js';
import type { RouteRunner } from './run.js';
import type { Runtime } from './runtime.js';
import type { Problem } from '../core/schema.js';

export interface BuildOptions {
  /** Resolved config file, or null for the built-in default. */
  configFile: string | null;
  env: NodeJS.ProcessEnv;
  /** The built-in plugins (the engine does not import plugins/: the caller hands them in). */
  plugins: readonly Plugin[];
}

export interface Inputs {
  config: GatewayConfig;
  source: string;
  /** Warnings about the config and the profiles (a FAIL throws); `file` when not the config's. */
  warnings: (Problem | FileProblem)[];
  profiles: ProfileSet;
  plans: EndpointPlan[];
  registry: PluginRegistry;
  pipelines: PipelineLoad;
}

/** Load and check everything; throws a ConfigError naming the file, the field and the fix. */
export async function loadInputs(o: BuildOptions): Promise<Inputs> {
  const { config, source, problems } = loadConfig(o.configFile, o.env);
  const { profiles, warnings: profileWarnings } = loadProfilesReporting(config.proxy.profiles_dir);
  const { plans, problems: planProblems } = planEndpoints(config, profiles, source);
  const planFail = planProblems.find((p) => p.level === 'fail');
  if (planFail) throw new ConfigError(source, planFail.field, planFail.message, planFail.fix);
  const registry = new PluginRegistry(o.plugins);
  const loaded = await registry.loadThirdParty(config.plugins, process.cwd());
  loaded.forEach((r, i) => {
    if (r.error)
      throw new ConfigError(source, `plugins[${i}]`, `plugin ${r.spec}: ${r.error}`, r.fix ?? 'fix the plugin, or remove it from plugins: in the config');
  });
  const pipelines = checkPipelines(config.pipelines.dir);
  for (const f of pipelines.files) {
    const fail = f.problems.find((p) => p.level === 'fail');
    if (fail) throw new ConfigError(f.file, fail.field, fail.message, fail.fix);
  }
  return { config, source, warnings: [...problems, ...planProblems, ...profileWarnings], profiles, plans, registry, pipelines };
}

/** Compile the graph against a runtime; throws a ConfigError for the first failing pipeline. */
export function compile(inputs: Inputs, runtime: Runtime, run: RouteRunner): Graph {
  const { graph, problems } = compileGraph(inputs.pipelines, inputs.registry, runtime, run);
  if (graph) return graph;
  const bad = problems.find((c) => c.problems.some((p) => p.level === 'fail'))!;
  const fail = bad.problems.find((p) => p.level === 'fail')!;
  const where = writtenIn(fail.field, bad.file, inputs.pipelines, inputs.source);
  throw new ConfigError(where.file, where.field, fail.message, fail.fix);
}
