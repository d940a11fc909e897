// docs/reference/configuration.md is generated from schemas/config.schema.json by
// schemas/config-reference.js: the committed page is what the generator writes now, every property
// of the schema says what it does, and the environment variables listed are the ones the engine reads.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

type Generator = { configReference(schema: unknown): string; ENV_VARS: readonly (readonly [string, string])[] };
const generatorFile = new URL('../../schemas/config-reference.js', import.meta.url).href;
const { configReference, ENV_VARS } = (await import(generatorFile)) as Generator;

const schema = JSON.parse(readFileSync('schemas/config.schema.json', 'utf8'));

/** Every property of a schema, wherever it is declared (definitions, items, oneOf/anyOf/allOf,
 *  additionalProperties), as a JSON pointer with its node. */
function properties(node: unknown, pointer = ''): { pointer: string; node: Record<string, unknown> }[] {
  if (!node || typeof node !== 'object') return [];
  if (Array.isArray(node)) return node.flatMap((item, i) => properties(item, `${pointer}/${i}`));
  const out: { pointer: string; node: Record<string, unknown> }[] = [];
  for (const [key, value] of Object.entries(node)) {
    if (key === 'properties' && value && typeof value === 'object') {
      for (const [name, prop] of Object.entries(value)) out.push({ pointer: `${pointer}/properties/${name}`, node: prop as Record<string, unknown> });
    }
    if (key !== 'default' && key !== 'enum' && key !== 'const') out.push(...properties(value, `${pointer}/${key}`));
  }
  return out;
}

function engineSources(dir = 'engine'): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? engineSources(path) : path.endsWith('.ts') ? [path] : [];
  });
}

describe('the configuration reference', () => {
  it('is what schemas/config-reference.js writes from the schema', () => {
    const committed = readFileSync('docs/reference/configuration.md', 'utf8');
    expect(configReference(schema) === committed, 'docs/reference/configuration.md differs from the schema: run node schemas/config-reference.js').toBe(true);
  });

  it('has a description for every property of the schema', () => {
    const all = properties(schema);
    expect(all.length, "the walk found the schema's properties").toBeGreaterThan(100);
    const missing = all.filter(({ node }) => typeof node.description !== 'string' || node.description.trim() === '').map(({ pointer }) => pointer);
    expect(missing, 'schemas/config.schema.json: properties without a description').toEqual([]);
  });

  it('lists the environment variables the engine reads (GW_* and the standard OTEL_* ones)', () => {
    const read = new Set<string>();
    for (const file of engineSources()) {
      const source = readFileSync(file, 'utf8');
      for (const m of source.matchAll(/^\s*((?:GW|OTEL)_[A-Z0-9_]+): \(/gm)) read.add(m[1]);
      if (/\benv\.GW_CONFIG\b/.test(source)) read.add('GW_CONFIG');
    }
    expect(read.size, "the engine's table of GW_* overrides was not found").toBeGreaterThan(1);
    expect(ENV_VARS.map(([name]) => name).sort()).toEqual([...read].sort());
  });
});
