// ajv set-up and the translation of its errors into problems a person can act on:
// which field, what is wrong, what to write instead.
import AjvImport, { type ErrorObject, type ValidateFunction } from 'ajv';
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { fnv1a36 } from './hash.js';
import { DURATION, durationHint, isDurationPattern } from './duration.js';
import { PACKAGE_ROOT, SCHEMAS_DIR } from './paths.js';

const Ajv = AjvImport as unknown as typeof AjvImport.default;

export interface Problem {
  level: 'fail' | 'warn';
  field: string;
  message: string;
  fix?: string;
  /** Follows from a failure reported on its own (a step whose plugin did not load): shown under
   *  it, not counted again. */
  consequence?: boolean;
}

/** How every validator is compiled (a change here makes the build's validators stale: schemaDigest). */
const AJV_OPTIONS = { allErrors: true, verbose: true, strict: false } as const;

/** `code`: ajv's code options (the build's standalone validators: schemas/precompile.js). */
export function createAjv(opts: AjvOptions & { code?: { source: boolean } } = {}) {
  const ajv = new Ajv({
    ...AJV_OPTIONS,
    useDefaults: opts.useDefaults ?? false,
    removeAdditional: opts.removeAdditional ?? false,
    ...(opts.code ? { code: opts.code } : {}),
  });
  // The config refers to the shared-step form (pipelines.before/after).
  ajv.addSchema(loadSchema('shared-steps'));
  return ajv;
}

export interface AjvOptions {
  useDefaults?: boolean;
  removeAdditional?: boolean;
}

/** The schemas the gateway validates its own files with, and how: compiled at build time
 *  (schemas/precompile.js), since compiling them at start cost each process about a quarter of a
 *  second and some 15 MB it kept. */
export const PRECOMPILED: readonly [name: string, opts: AjvOptions][] = [
  ['config', {}],
  ['config', { useDefaults: true, removeAdditional: true }],
  ['profile', { useDefaults: true }],
  ['pipeline', { useDefaults: true }],
  ['shared-steps', { useDefaults: true }],
];

export const precompiledFile = (name: string, opts: AjvOptions) =>
  join(PACKAGE_ROOT, 'dist', 'schemas', `${name}${opts.useDefaults ? '.defaults' : ''}${opts.removeAdditional ? '.strip' : ''}.cjs`);

/** What a precompiled validator was made from: the schema files, ajv's version and options. */
export function schemaDigest(name: string, opts: AjvOptions = {}): string {
  const ajvVersion = JSON.parse(readFileSync(createRequire(import.meta.url).resolve('ajv/package.json'), 'utf8')).version;
  const files = [name, 'shared-steps'].map((n) => readFileSync(join(SCHEMAS_DIR, `${n}.schema.json`), 'utf8'));
  return fnv1a36([...files, ajvVersion, JSON.stringify({ ...AJV_OPTIONS, ...opts })].join('\n'));
}

/** The validator of one of the gateway's schemas: the build's, when it was made from the schema
 *  files as they are now; else compiled here (a checkout not rebuilt since a schema changed). */
export function validatorOf(name: string, opts: AjvOptions = {}): ValidateFunction {
  const file = precompiledFile(name, opts);
  if (existsSync(file)) {
    const built = createRequire(import.meta.url)(file) as ValidateFunction & { digest?: string };
    if (built.digest === schemaDigest(name, opts)) {
      // What an ajv-compiled validator carries and explain() reads (where a misplaced key belongs).
      (built as { schema: unknown }).schema ??= loadSchema(name);
      return built;
    }
  }
  const ajv = createAjv(opts);
  return name === 'shared-steps' ? ajv.getSchema('gw/shared-steps')! : ajv.compile(loadSchema(name));
}

export function loadSchema(name: string): Record<string, unknown> {
  return JSON.parse(readFileSync(join(SCHEMAS_DIR, `${name}.schema.json`), 'utf8'));
}

/** "/discovery/static/endpoints/0/url" → "discovery.static.endpoints[0].url" */
export function fieldName(pointer: string, base = ''): string {
  if (base.startsWith('/')) return base + pointer; // JSON-pointer style, for pipeline files
  let out = base;
  for (const part of pointer.split('/').slice(1)) {
    const key = part.replace(/~1/g, '/').replace(/~0/g, '~');
    out += /^\d+$/.test(key) ? `[${key}]` : out ? `.${key}` : key;
  }
  return out;
}

/** Edit distance counting a swap of neighbours as one edit (optimal string alignment). */
export function editDistance(a: string, b: string): number {
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) => [i, ...Array(b.length).fill(0)]);
  for (let j = 1; j <= b.length; j++) d[0][j] = j;
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      d[i][j] = Math.min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d[i][j] = Math.min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.length][b.length];
}

/** The closest candidate when it is close enough to be a misspelling. */
export function closest(word: string, candidates: Iterable<string>): string | undefined {
  let best: string | undefined;
  let bestDistance = Infinity;
  const w = word.toLowerCase();
  for (const c of candidates) {
    const d = editDistance(w, c.toLowerCase());
    if (d < bestDistance) [best, bestDistance] = [c, d];
  }
  const allowed = Math.max(1, Math.min(3, Math.floor(word.length / 3)));
  return bestDistance <= allowed ? best : undefined;
}

// Values under these keys may be credentials: a problem names the field and the expected type,
// never the value (a mistyped header must not print the token it holds), and no object or array
// is printed anywhere (one could hold such a key).
const SECRET_KEY = /^(headers|auth|redis)$|pass|secret|token|api.?key|authori[sz]ation|cookie|credential/i;

function isSecret(pointer: string): boolean {
  return pointer.split('/').some((part) => SECRET_KEY.test(part));
}

function kindOf(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  return typeof value === 'object' ? 'an object' : `a ${typeof value}`;
}

type SchemaNode = { properties?: Record<string, SchemaNode>; items?: SchemaNode; $ref?: string; definitions?: Record<string, SchemaNode> };

/** Where each key lives in a schema (dotted paths; `[]` marks a list's items), so that a key
 *  written at the wrong level is named with its home. Built once per schema. */
const homesOf = new WeakMap<object, Map<string, string[]>>();
function keyHomes(root: SchemaNode): Map<string, string[]> {
  let homes = homesOf.get(root);
  if (homes) return homes;
  const found = new Map<string, string[]>();
  const walk = (node: SchemaNode | undefined, path: string, depth: number) => {
    if (node?.$ref?.startsWith('#/definitions/')) node = root.definitions?.[node.$ref.slice('#/definitions/'.length)];
    if (!node || depth > 5) return;
    if (node.items) walk(node.items, `${path}[]`, depth + 1);
    for (const [key, child] of Object.entries(node.properties ?? {})) {
      const full = path ? `${path}.${key}` : key;
      const list = found.get(key);
      if (list) list.push(full);
      else found.set(key, [full]);
      walk(child, full, depth + 1);
    }
  };
  walk(root, '', 0);
  homesOf.set(root, (homes = found));
  return homes;
}

/** The one other place a key belongs (`endpoints` → discovery.static.endpoints), when it has
 *  exactly one outside a list. A short plain word (type, timeout, window) is named only when its
 *  home is one level down (port → server.port): deeper, a guess would more often mislead. */
function homeOf(key: string, field: string, root: SchemaNode | undefined): string | undefined {
  const homes = root ? keyHomes(root).get(key) : undefined;
  if (homes?.length !== 1) return undefined;
  const home = homes[0];
  const depth = home.split('.').length;
  if (home.includes('[]') || home === (field ? `${field}.${key}` : key)) return undefined;
  return key.includes('_') || key.length >= 8 || depth === 2 ? home : undefined;
}

/** The dotted home as YAML, to paste: discovery.static.endpoints → "discovery: static: endpoints:". */
const asYaml = (home: string) =>
  home
    .split('.')
    .map((k) => `${k}:`)
    .join(' ');

function describe(e: ErrorObject, base: string, root?: SchemaNode): Problem {
  const field = fieldName(e.instancePath, base);
  const where = field || '(top level)';
  // Objects and arrays are never printed: a misplaced endpoint would bring its headers along.
  const shown = isSecret(e.instancePath)
    ? `${kindOf(e.data)} (value not shown: it may be a secret)`
    : typeof e.data === 'object' && e.data !== null
      ? kindOf(e.data)
      : JSON.stringify(e.data);
  switch (e.keyword) {
    case 'additionalProperties': {
      const key = String(e.params.additionalProperty);
      const known = Object.keys((e.parentSchema as { properties?: object })?.properties ?? {});
      const full = field ? `${field}.${key}` : key;
      const guess = closest(key, known);
      if (guess)
        return {
          level: 'fail',
          field: full,
          message: `unknown key "${key}"`,
          fix: `did you mean "${guess}"? rename it to ${field ? `${field}.` : ''}${guess}`,
        };
      // A key with a home elsewhere is misplaced, not extra: ignoring it would run without it.
      const home = homeOf(key, field, root);
      if (home)
        return {
          level: 'fail',
          field: full,
          message: `unknown key "${key}" ${field ? `under ${field}` : 'at the top level'}`,
          fix: `did you mean ${home}? move it there (${asYaml(home)} …)`,
        };
      return { level: 'warn', field: full, message: `unknown key "${key}" is ignored`, fix: known.length ? `known keys here: ${known.join(', ')}` : undefined };
    }
    case 'enum':
      return { level: 'fail', field: where, message: `value ${shown} is not allowed`, fix: `use one of: ${(e.params.allowedValues as unknown[]).join(', ')}` };
    case 'const':
      return { level: 'fail', field: where, message: `value ${shown} is not allowed`, fix: `use ${JSON.stringify(e.params.allowedValue)}` };
    case 'required':
      return {
        level: 'fail',
        field: where,
        message: `missing required key "${e.params.missingProperty}"`,
        fix: `add ${field ? `${field}.` : ''}${e.params.missingProperty}`,
      };
    case 'type':
      // A duration written as a bare number: say which unit to add.
      if (isDurationPattern((e.parentSchema as { pattern?: unknown })?.pattern)) {
        const number = typeof e.data === 'number' && !isSecret(e.instancePath);
        return {
          level: 'fail',
          field: where,
          message: `must be a duration string such as "5s" (got ${number ? `the number ${shown}; ${durationHint(e.data as number)}` : shown})`,
          fix: 'a duration is a number with a unit: 500ms, 5s, 5m, 1h',
        };
      }
      return {
        level: 'fail',
        field: where,
        message: `must be ${e.params.type}, got ${shown}`,
        fix: typeFix(String(e.params.type), e.data, e.parentSchema, where),
      };
    case 'pattern':
      if (isDurationPattern(e.params.pattern)) {
        if (typeof e.data === 'string' && DURATION.test(e.data)) {
          return {
            level: 'fail',
            field: where,
            message: `${shown} must be more than zero`,
            fix: 'write a duration above zero, such as 5s; zero would make the gateway spin or time out at once',
          };
        }
        return { level: 'fail', field: where, message: `${shown} is not a duration`, fix: 'write a number with a unit: 500ms, 5s, 5m, 1h' };
      }
      return { level: 'fail', field: where, message: `${shown} does not match ${e.params.pattern}` };
    default:
      return { level: 'fail', field: where, message: e.message ?? 'is invalid' };
  }
}

/** What to write instead of a value of the wrong type. */
function typeFix(expected: string, data: unknown, schema: unknown, where: string): string {
  const s = (schema ?? {}) as { default?: unknown; properties?: Record<string, { type?: unknown }> };
  if (expected === 'object' && Array.isArray(data)) {
    const lists = Object.entries(s.properties ?? {}).filter(([, p]) => p.type === 'array');
    return lists.length === 1
      ? `put the list under ${where}.${lists[0][0]} (a key, then the list under it)`
      : 'write keys and values here (key: value lines), not a list';
  }
  if (expected === 'integer' || expected === 'number') {
    if (typeof data === 'string' && data.trim() !== '' && Number.isFinite(Number(data))) return `write the number without quotes: ${Number(data)}`;
    return `write a ${expected === 'integer' ? 'whole ' : ''}number${typeof s.default === 'number' ? `, such as ${s.default} (the default)` : ''}`;
  }
  if (expected === 'boolean') return 'write true or false (without quotes)';
  if (expected === 'array') return 'write a list: [a, b] on one line, or one "- item" line each';
  if (expected === 'string') return 'write it as text (in quotes when it looks like a number or true/false)';
  return `write a value of type ${expected}`;
}

/** Validate and explain. `base` prefixes field names (a plugin's step, for example). */
export function explain(validate: ValidateFunction, data: unknown, base = ''): Problem[] {
  if (validate(data)) return [];
  // $ref'd sub-schemas and anyOf branches repeat errors; keep one per field and message.
  const seen = new Set<string>();
  const out: Problem[] = [];
  for (const e of validate.errors ?? []) {
    const p = describe(e, base, validate.schema as SchemaNode);
    const key = `${p.field}|${p.message}`;
    if (!seen.has(key)) {
      seen.add(key);
      out.push(p);
    }
  }
  return out;
}

export function formatProblem(p: Problem): string {
  return `${p.field}: ${p.message}${p.fix ? ` — ${p.fix}` : ''}`;
}
