// Pipeline YAML: the built-in files in pipelines/, then custom ones from pipelines.dir; a custom
// pipeline with a built-in's `name` replaces it.
import { existsSync, readdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { ConfigError } from './errors.js';
import { BUILTIN_PIPELINES_DIR } from './paths.js';
import { createAjv, explain, loadSchema, type Problem } from './schema.js';
import { readYaml } from './yaml-file.js';

export interface StepDef {
  use: string;
  with?: Record<string, unknown>;
}

export interface PipelineDef {
  name: string;
  description?: string;
  mount: { per_profile: boolean; paths: string[]; methods: string[]; enabled_by?: string };
  error_format: 'gateway' | 'msgapi';
  steps: StepDef[];
  file: string;
}

const validate = createAjv({ useDefaults: true }).compile(loadSchema('pipeline'));

export interface PipelineLoad {
  pipelines: PipelineDef[];
  files: { file: string; name?: string; problems: Problem[]; replaces?: string }[];
}

export function checkPipelines(customDir: string): PipelineLoad {
  const byName = new Map<string, PipelineDef>();
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
    const problems = explain(validate, raw);
    const def = raw as PipelineDef;
    const entry: PipelineLoad['files'][number] = { file, name: def?.name, problems };
    files.push(entry);
    if (problems.some((p) => p.level === 'fail')) return;
    if (!def.mount.per_profile && def.mount.paths.length === 0) {
      problems.push({ level: 'fail', field: 'mount', message: 'the pipeline mounts nowhere', fix: 'set mount.per_profile: true or list mount.paths' });
      return;
    }
    const existing = byName.get(def.name);
    if (existing && !custom) problems.push({ level: 'fail', field: 'name', message: `pipeline name "${def.name}" is also used by ${existing.file}` });
    if (existing && custom) entry.replaces = existing.file;
    byName.set(def.name, { ...def, file });
  };
  for (const f of yamlFiles(BUILTIN_PIPELINES_DIR)) load(f, false);
  const dir = resolve(customDir);
  if (existsSync(dir)) for (const f of yamlFiles(dir)) load(f, true);
  return { pipelines: [...byName.values()], files };
}

function yamlFiles(dir: string): string[] {
  return readdirSync(dir).filter((f) => /\.ya?ml$/.test(f)).sort().map((f) => join(dir, f));
}
