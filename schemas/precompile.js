// Build step (npm run build, npm install): the gateway's own schemas compiled to validators once,
// here, instead of in every process at start (ajv's standalone code; dist/schemas/*.cjs). Each
// file records the digest of the schema files it came from: a checkout whose schemas changed
// since compiles at start again (engine/core/schema.ts validatorOf) until it is rebuilt.
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import standaloneCode from 'ajv/dist/standalone/index.js';

const dist = new URL('../dist/engine/core/schema.js', import.meta.url);
const { PRECOMPILED, createAjv, loadSchema, precompiledFile, schemaDigest } = await import(dist.href);
const standalone = standaloneCode.default ?? standaloneCode;

for (const [name, opts] of PRECOMPILED) {
  const ajv = createAjv({ ...opts, code: { source: true } });
  const validate = name === 'shared-steps' ? ajv.getSchema('gw/shared-steps') : ajv.compile(loadSchema(name));
  const file = precompiledFile(name, opts);
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, `${standalone(ajv, validate)}\nmodule.exports.digest = ${JSON.stringify(schemaDigest(name, opts))};\n`);
}
