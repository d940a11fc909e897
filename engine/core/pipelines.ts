// Pipeline YAML: the built-in files in pipelines/, then custom ones from pipelines.dir; a custom
// file with a built-in's `name` replaces it. `shared.yaml` (name: shared) holds the steps that
// wrap every pipeline rather than a pipeline of its own.
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { ConfigError, type ErrorFormat } from './errors.js';
import { BUILTIN_PIPELINES_DIR } from './paths.js';
import { explain, validatorOf, type Problem } from './schema.js';
import { readYaml } from './yaml-file.js';

export interface StepDef {
  use: string;
  with?: Record<string, unknown>;
}

/** A step that wraps pipelines: a plugin name, or the step with the pipelines it applies to. */
export type SharedStepDef = string | (StepDef & { only?: string[]; except?: string[] });

export interface SharedSteps {
  before: SharedStepDef[];
  after: SharedStepDef[];
  file: string;
}

export interface PipelineDef {
  name: string;
  description?: string;
  mount: { per_profile: boolean; families?: string[]; fills?: string; paths: string[]; methods: string[]; enabled_by?: string };
  error_format: ErrorFormat;
  steps: StepDef[];
  file: string;
}

const validatePipeline = validatorOf('pipeline', { useDefaults: true });
const validateShared = validatorOf('shared-steps', { useDefaults: true });

export interface PipelineLoad {
  pipelines: PipelineDef[];
  shared: SharedSteps;
  files: { file: string; name?: string; problems: Problem[]; replaces?: string }[];
}

export function checkPipelines(customDir: string): PipelineLoad {
  const byName = new Map<string, PipelineDef>();
  let shared: SharedSteps = { before: [], after: [], file: '(none)' };
  const files: PipelineLoad['files'] = [];
  const load = (file: string, custom: boolean) => {
    let raw: unknown;
    try {
      raw = readYaml(file);
    } catch (err) {
      if (!(err instanceof ConfigError)) throw err;
      files.push({ file, problems: [{ level: 'fail', field: err.field, message: err.problem, fix: err.fix }] });
      return;
    }
    const name = (raw as { name?: unknown })?.name;
    if (name === 'shared') {
      const problems = explain(validateShared, raw, '');
      const entry: PipelineLoad['files'][number] = { file, name: 'shared', problems };
      files.push(entry);
      if (problems.some((p) => p.level === 'fail')) return;
      if (custom) entry.replaces = shared.file;
      shared = { ...(raw as Omit<SharedSteps, 'file'>), file };
      return;
    }
    const problems = explain(validatePipeline, raw);
    const def = raw as PipelineDef;
    const entry: PipelineLoad['files'][number] = { file, name: def?.name, problems };
    files.push(entry);
    if (problems.some((p) => p.level === 'fail')) return;
    if (!def.mount.per_profile && def.mount.paths.length === 0) {
      problems.push({ level: 'fail', field: 'mount', message: 'the pipeline mounts nowhere', fix: 'set mount.per_profile: true or list mount.paths' });
      return;
    }
    if (def.mount.fills && !def.mount.per_profile) {
      problems.push({
        level: 'fail',
        field: 'mount.fills',
        message: 'fills applies to per-profile mounts only',
        fix: 'add mount.per_profile: true, or list the route in mount.paths',
      });
      return;
    }
    if (def.mount.families && !def.mount.per_profile) {
      problems.push({
        level: 'fail',
        field: 'mount.families',
        message: 'families applies to per-profile mounts only',
        fix: 'add mount.per_profile: true, or remove mount.families',
      });
      return;
    }
    const existing = byName.get(def.name);
    if (existing && !custom) problems.push({ level: 'fail', field: 'name', message: `pipeline name "${def.name}" is also used by ${existing.file}` });
    if (existing && custom) entry.replaces = existing.file;
    byName.set(def.name, { ...def, file });
  };
  for (const f of yamlFiles(BUILTIN_PIPELINES_DIR)) load(f, false);
  const dir = resolve(customDir);
  if (existsSync(dir) && statSync(dir).isDirectory()) for (const f of yamlFiles(dir)) load(f, true);
  return { pipelines: [...byName.values()], shared, files };
}

function yamlFiles(dir: string): string[] {
  return readdirSync(dir)
    .filter((f) => /\.ya?ml$/.test(f))
    .sort()
    .map((f) => join(dir, f));
}

/** A name pattern as a regular expression: `*` matches any run of characters, nothing else is special. */
export function globRegExp(pattern: string): RegExp {
  return new RegExp(
    `^${pattern
      .split('*')
      .map((p) => p.replace(/[.+?^${}()|[\]\\]/g, '\\$&'))
      .join('.*')}$`,
  );
}

/** Does the pipeline name match a shared step's `only`/`except` pattern (`*` matches any run)? */
export function nameMatches(pattern: string, name: string): boolean {
  return pattern.includes('*') ? globRegExp(pattern).test(name) : pattern === name;
}
