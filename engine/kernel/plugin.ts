// The plugin contract ({name, schema, apply}) and the registry: built-ins plus third-party
// plugins named in the config by path or package name, loaded under the same contract.
import type { ValidateFunction } from 'ajv';
import { existsSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { Hooks } from './hooks.js';
import type { Profile } from '../core/profiles.js';
import type { Runtime } from './runtime.js';
import { createAjv } from '../core/schema.js';
import { routePluginImports } from './plugin-imports.js';

/** What a plugin sees when it is applied: the runtime, plus the family for per-profile routes. */
export interface PluginEnv extends Runtime {
  pipeline: string;
  profile?: Profile;
}

/**
 * What a step reads from the context and what it sets there, for the order check: a step that
 * `needs` a fact must come after the step that `provides` it; a step that `uses` one (reads it
 * when present) must come after its provider when the pipeline has one. Built-in facts: `path`
 * (match-prefix), `body` (read-body), `messages-request` (msgapi-parse), `aliases`
 * (alias-resolve), `candidates` (select-endpoint).
 */
export type Facts<O> = readonly string[] | ((options: O) => readonly string[]);

export interface Plugin<O = any> {
  /** kebab-case; equals the file name, the tap name and the YAML `use:`. */
  name: string;
  /** JSON Schema of the step's `with:` options; defaults are filled in at compile time. */
  schema: Record<string, unknown>;
  /** A terminal plugin answers the request (taps `dispatch`); a pipeline has exactly one. */
  terminal?: boolean;
  /** Per-profile plugins need a family (proxy routes) and fail to compile elsewhere. */
  needsProfile?: boolean;
  needs?: Facts<O>;
  uses?: Facts<O>;
  provides?: Facts<O>;
  apply(hooks: Hooks, options: O, env: PluginEnv): void;
}

export function factsOf<O>(facts: Facts<O> | undefined, options: O): readonly string[] {
  return typeof facts === 'function' ? facts(options) : (facts ?? []);
}

export function definePlugin<O = Record<string, any>>(plugin: Plugin<O>): Plugin<O> {
  return plugin;
}

interface Registered {
  plugin: Plugin;
  validate: ValidateFunction;
  /** "built-in" or where a third-party plugin came from. */
  origin: string;
}

const NAME = /^[a-z][a-z0-9]*(-[a-z0-9]+)*$/;

export class PluginRegistry {
  private readonly map = new Map<string, Registered>();
  private readonly ajv = createAjv({ useDefaults: true });
  /** Third-party plugins that did not load (index in plugins:), for the steps that name them. */
  readonly failed: { index: number; spec: string }[] = [];

  constructor(builtins: readonly Plugin[]) {
    for (const p of builtins) this.add(p, 'built-in');
  }

  get(name: string): Registered | undefined {
    return this.map.get(name);
  }

  names(): string[] {
    return [...this.map.keys()];
  }

  /** Add a plugin after checking the contract; returns the problem as text, or undefined. */
  add(candidate: unknown, origin: string): string | undefined {
    const p = candidate as Partial<Plugin> | null;
    if (!p || typeof p !== 'object') return 'does not export a plugin object ({ name, schema, apply })';
    if (typeof p.name !== 'string' || !NAME.test(p.name)) return `plugin name ${JSON.stringify(p.name)} must be kebab-case (e.g. my-plugin)`;
    if (typeof p.apply !== 'function') return `plugin ${p.name} has no apply(hooks, options, env) function`;
    if (!p.schema || typeof p.schema !== 'object') return `plugin ${p.name} has no options schema (use { type: 'object' } for none)`;
    const existing = this.map.get(p.name);
    if (existing) return `plugin name ${p.name} is already taken by ${existing.origin === 'built-in' ? 'a built-in plugin' : existing.origin}; rename it`;
    let validate: ValidateFunction;
    try {
      validate = this.ajv.compile(p.schema);
    } catch (err) {
      return `plugin ${p.name} has an invalid options schema: ${(err as Error).message}`;
    }
    this.map.set(p.name, { plugin: p as Plugin, validate, origin });
    return undefined;
  }

  /** Load third-party plugins; each spec is a file path (./x.js, /abs/x.js), a package folder
   *  or a package name. A file is imported afresh when it changed since the last import (hot
   *  reload); an unchanged one is the module already loaded. */
  async loadThirdParty(specs: readonly string[], cwd = process.cwd()): Promise<LoadResult[]> {
    if (specs.length) routePluginImports();
    const results: LoadResult[] = [];
    for (const [index, spec] of specs.entries()) {
      const result = await this.loadOne(spec, cwd);
      if (result.error) this.failed.push({ index, spec });
      results.push(result);
    }
    return results;
  }

  private async loadOne(spec: string, cwd: string): Promise<LoadResult> {
    const isPath = spec.startsWith('.') || spec.startsWith('/');
    const target = isPath ? resolve(cwd, spec) : spec;
    if (isPath && !existsSync(target)) {
      return {
        spec,
        names: [],
        error: `cannot load: ${target} does not exist (relative paths resolve against the working directory, ${cwd})`,
        fix: 'correct the path in plugins: or run the gateway from the folder it is relative to',
      };
    }
    let file: string;
    try {
      // A file, a package folder (its package.json main), or an installed package by name.
      file = isPath
        ? statSync(target).isDirectory()
          ? createRequire(join(target, 'index.js')).resolve(target)
          : target
        : createRequire(join(cwd, 'package.json')).resolve(spec);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (isPath)
        return {
          spec,
          names: [],
          error: `cannot load: ${(err as Error).message.split('\n')[0]}`,
          fix: `give ${target} a package.json "main" or an index.js, or name the plugin's file`,
        };
      if (code !== 'MODULE_NOT_FOUND')
        return {
          spec,
          names: [],
          error: `cannot load: ${(err as Error).message.split('\n')[0]}`,
          fix: `reinstall ${spec}, or name the plugin's file by its path`,
        };
      return {
        spec,
        names: [],
        error: `cannot load: package ${spec} is not installed`,
        fix: `npm install ${spec} in ${cwd} (package names resolve from the working directory), or name the plugin's file or folder by its path`,
      };
    }
    let mod: Record<string, unknown>;
    try {
      const url = pathToFileURL(file);
      url.searchParams.set('mtime', String(statSync(file).mtimeMs));
      mod = await import(url.href);
    } catch (err) {
      return { spec, names: [], ...importFailure(err as NodeJS.ErrnoException, file, isPath && statSync(target).isDirectory() ? target : dirname(file)) };
    }
    const exported: unknown[] = Array.isArray(mod.plugins) ? mod.plugins : [mod.default ?? mod.plugin];
    const names: string[] = [];
    for (const p of exported) {
      const error = this.add(p, spec);
      if (error) return { spec, names, error };
      names.push((p as Plugin).name);
    }
    return { spec, names };
  }
}

export interface LoadResult {
  spec: string;
  /** The plugins it registered. */
  names: string[];
  error?: string;
  /** What to do about the error, when more can be said than "fix the plugin". */
  fix?: string;
}

/** A plugin file that did not import: the file, what went wrong, and what to do. */
function importFailure(err: NodeJS.ErrnoException, file: string, folder: string): { error: string; fix: string } {
  const missing = /^Cannot find package '([^']+)'/.exec(err.message)?.[1];
  if (err.code === 'ERR_MODULE_NOT_FOUND' && missing && !missing.startsWith('/')) {
    return {
      error: `cannot load ${file}: ${err.message}`,
      fix: `install it for the plugin: npm install ${missing} in ${folder} (inference-gateway itself needs no install)`,
    };
  }
  if (err.name === 'SyntaxError')
    return { error: `cannot load ${file}: SyntaxError: ${err.message}`, fix: `node --check ${file} shows the line (or the file it imports that has it)` };
  // Where it threw, when it threw while running: the first frame in a file.
  const frame = /(file:\/\/[^\s)]+?)(:\d+:\d+)/.exec(err.stack ?? '');
  const at = frame ? ` (at ${fileURLToPath(frame[1])}${frame[2]})` : '';
  return { error: `cannot load ${file}: ${err.message}${at}`, fix: 'fix the plugin, or remove it from plugins: in the config' };
}
