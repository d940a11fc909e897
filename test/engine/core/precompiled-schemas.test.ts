// The gateway's own schemas are compiled at build time (schemas/precompile.js): a process loads
// the validators instead of compiling them at start. They must answer exactly as validators
// compiled from the schema files now would — errors (with their paths and messages), and the
// defaults filled in and the unknown keys removed — and one made from other schema files than
// these is not used.
import { existsSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { createAjv, loadSchema, precompiledFile, PRECOMPILED, schemaDigest, validatorOf } from '../../../engine/core/schema.js';

const SAMPLES: Record<string, unknown[]> = {
  config: [
    {},
    { server: { port: 'eighty', workers: 0 } },
    { proxy: { load_balancer: 'random', bogus: 1 } },
    { discovery: { static: { endpoints: [{ name: 'a b', type: 'x' }] } } },
    { server: { rate_limits: { store: 'redis', redis: { url: 'http://x' } } } },
  ],
  profile: [{ name: 'x' }, { name: 'x', routing: { prefixes: 'gw' } }, { name: 'x', api: { paths: [1] } }],
  pipeline: [{ name: 'p', mount: { paths: ['/x'] }, steps: [{ use: 'forward' }] }, { name: 'p', steps: 'forward' }, { mount: {} }],
  'shared-steps': [['cors'], [{ use: 'cors', with: 3 }], 'cors'],
};

describe('precompiled schema validators', () => {
  for (const [name, opts] of PRECOMPILED) {
    const label = `${name}${opts.useDefaults ? ' (defaults)' : ''}${opts.removeAdditional ? ' (strip)' : ''}`;
    it(`${label}: the build's validator, made from these schema files, answers as one compiled now`, () => {
      const file = precompiledFile(name, opts);
      expect(existsSync(file), `${file} missing: npm run build`).toBe(true);
      expect(readFileSync(file, 'utf8')).toContain(JSON.stringify(schemaDigest(name, opts)));
      const built = validatorOf(name, opts);
      expect((built as unknown as { digest?: string }).digest).toBe(schemaDigest(name, opts));
      const ajv = createAjv(opts);
      const compiled = name === 'shared-steps' ? ajv.getSchema('gw/shared-steps')! : ajv.compile(loadSchema(name));
      for (const sample of SAMPLES[name]) {
        const a = structuredClone(sample);
        const b = structuredClone(sample);
        expect(built(a)).toBe(compiled(b));
        expect(a).toEqual(b);
        const strip = (errors: typeof built.errors) =>
          (errors ?? []).map((e) => ({ path: e.instancePath, keyword: e.keyword, message: e.message, params: e.params }));
        expect(strip(built.errors)).toEqual(strip(compiled.errors));
      }
    });
  }
});
