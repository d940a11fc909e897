// `gw validate`: load config, profiles, endpoints, plugins and pipelines exactly as serving would,
// print one PASS/WARN/FAIL line per check and a summary; never listens. Exit 0 unless something failed.
import { relative } from 'node:path';
import { compileGraph, writtenIn, type CompileResult } from './compile.js';
import { checkConfig } from '../core/config.js';
import { planEndpoints, type EffectiveSettings } from '../backends/endpoint-plans.js';
import { createLogger } from '../core/logger.js';
import { checkPipelines, type PipelineLoad } from '../core/pipelines.js';
import { PluginRegistry } from './plugin.js';
import { checkProfiles } from '../core/profiles.js';
import { runtimeOf } from './runtime.js';
import { Backends } from '../backends/state.js';
import type { Plugin } from './plugin.js';
import type { Problem } from '../core/schema.js';
import { VERSION } from './gateway.js';

type Level = 'PASS' | 'WARN' | 'FAIL';

/** "response_timeout 2s (proxy.response_timeout), stream_idle_timeout 300s (default), …" */
export function settingsText(s: EffectiveSettings): string {
  return Object.entries(s)
    .map(([key, e]) => `${key} ${Array.isArray(e.value) ? `[${e.value.join(', ')}]` : e.value} (${e.from})`)
    .join(', ');
}

/** A shared step's problem once, however many pipelines it wraps. */
function foldShared(compiled: CompileResult['problems'], load: PipelineLoad, source: string): { problem: Problem; file: string; pipelines: string[] }[] {
  const once = new Map<string, { problem: Problem; file: string; pipelines: string[] }>();
  for (const c of compiled) {
    for (const p of c.problems) {
      const where = writtenIn(p.field, c.file, load, source);
      if (!where.shared) continue;
      const key = `${p.level}\0${p.field}\0${p.message}\0${p.fix}`;
      const seen = once.get(key);
      if (seen) seen.pipelines.push(c.pipeline);
      else once.set(key, { problem: { ...p, field: where.field }, file: where.file, pipelines: [c.pipeline] });
    }
  }
  return [...once.values()];
}

export async function validate(configFile: string | null, env: NodeJS.ProcessEnv, print: (line: string) => void, builtins: readonly Plugin[]): Promise<number> {
  const counts: Record<Level, number> = { PASS: 0, WARN: 0, FAIL: 0 };
  const line = (level: Level, text: string) => {
    counts[level]++;
    print(`${level} ${text}`);
  };
  const show = (f: string) => {
    const rel = relative(process.cwd(), f);
    return f.startsWith('(') || !rel || rel.startsWith('..') ? f : rel;
  };
  const problemLine = (what: string, p: Problem, where = '') => {
    const text = `${what}: ${p.field ? `${p.field}: ` : ''}${p.message}${where}${p.fix ? ` — fix: ${p.fix}` : ''}`;
    // What follows from a failure already on its own FAIL line is said under it, not counted.
    if (p.consequence) print(`  ↳ ${text}`);
    else line(p.level === 'fail' ? 'FAIL' : 'WARN', text);
  };
  /** The problems, then PASS when none failed; passText null: no PASS line (it failed elsewhere). */
  const report = (what: string, problems: Problem[], passText: string | null) => {
    for (const p of problems) problemLine(what, p);
    if (passText !== null && !problems.some((p) => p.level === 'fail')) line('PASS', `${what}${passText ? `: ${passText}` : ''}`);
  };

  const source = configFile ?? '(built-in default)';
  const { loaded, problems } = checkConfig(configFile, env);
  report(`config ${show(source)}`, problems, 'valid');
  if (!loaded) {
    print(`summary: ${counts.PASS} passed, ${counts.WARN} warnings, ${counts.FAIL} failed (fix the config first; later checks need it)`);
    return 1;
  }
  const { config } = loaded;

  const profileLoad = checkProfiles(config.proxy.profiles_dir);
  for (const f of profileLoad.files) {
    const pass = [f.replaces ? `replaces the built-in ${show(f.replaces)}` : '', ...(f.notes ?? [])].filter(Boolean).join('; ');
    report(`profile ${f.name ?? '?'} (${show(f.file)})`, f.problems, pass);
  }

  let endpointsOk = false;
  let plans: ReturnType<typeof planEndpoints>['plans'] = [];
  if (profileLoad.profiles) {
    const planned = planEndpoints(config, profileLoad.profiles, source);
    plans = planned.plans;
    report(
      `endpoints in ${show(source)}`,
      planned.problems,
      `${plans.length} endpoint${plans.length === 1 ? '' : 's'} (${plans.map((p) => `${p.name}: ${p.profile.name}`).join(', ')})`,
    );
    endpointsOk = !planned.problems.some((p) => p.level === 'fail');
    // The timeouts and failover settings each endpoint runs with, and which setting won.
    for (const p of plans) line('PASS', `endpoint ${p.name}: ${settingsText(p.settings)}`);
  }

  const plugins = new PluginRegistry(builtins);
  line('PASS', `plugins: ${builtins.length} built-in`);
  const thirdParty = await plugins.loadThirdParty(config.plugins);
  thirdParty.forEach((r, i) => {
    if (r.error) line('FAIL', `plugin plugins[${i}] ${r.spec}: ${r.error}${r.fix ? ` — fix: ${r.fix}` : ''}`);
    else line('PASS', `plugin ${r.spec}: ${r.names.join(', ')}`);
  });

  const pipelineLoad = checkPipelines(config.pipelines.dir);
  const broken = new Set(pipelineLoad.files.filter((f) => f.problems.some((p) => p.level === 'fail')).map((f) => f.file));
  for (const f of pipelineLoad.files) if (broken.has(f.file) || f.problems.length) report(`pipeline ${f.name ?? '?'} (${show(f.file)})`, f.problems, '');

  if (profileLoad.profiles && endpointsOk) {
    const log = createLogger('error');
    const backends = new Backends(config, plans, log);
    const runtime = runtimeOf({
      config,
      source,
      profiles: profileLoad.profiles,
      backends,
      log,
      version: VERSION,
      startedAt: new Date(),
      reload: { generation: 0, last_attempt: null, ok: true, error: null },
    });
    const { problems: compiled, graph } = compileGraph(pipelineLoad, plugins, runtime, () => undefined);
    for (const { problem, file, pipelines } of foldShared(compiled, pipelineLoad, source)) {
      const where =
        pipelines.length === 1
          ? ` (pipeline ${pipelines[0]})`
          : ` (in ${pipelines.length} pipelines: ${pipelines.slice(0, 3).join(', ')}${pipelines.length > 3 ? ', …' : ''})`;
      problemLine(file === source ? `config ${show(source)}` : `shared steps (${show(file)})`, problem, where);
    }
    for (const c of compiled) {
      const routes = graph?.routes.filter((r) => r.pipeline === c.pipeline) ?? [];
      const paths = new Set(routes.map((r) => r.path)).size;
      const replaced = pipelineLoad.files.find((f) => f.file === c.file)?.replaces;
      const own = c.problems.filter((p) => !writtenIn(p.field, c.file, pipelineLoad, source).shared);
      // A pipeline a failing shared step wraps has its FAIL line above, not a PASS here.
      const sharedFailed = c.problems.some((p) => p.level === 'fail' && !own.includes(p));
      report(
        `pipeline ${c.pipeline} (${show(c.file)})`,
        own,
        sharedFailed
          ? null
          : graph
            ? `${c.pipeline === 'proxy' ? `${paths} routes` : `${paths} route${paths === 1 ? '' : 's'}`}${replaced ? `, replaces the built-in ${show(replaced)}` : ''}`
            : 'steps valid',
      );
    }
    await backends.stop();
  }
  print(`summary: ${counts.PASS} passed, ${counts.WARN} warnings, ${counts.FAIL} failed`);
  return counts.FAIL > 0 ? 1 : 0;
}
