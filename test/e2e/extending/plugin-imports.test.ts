// Third-party plugins in folders of their own, outside the gateway's (as `gw` loads them, in a
// process of its own): `inference-gateway` is the running gateway, with nothing installed; every
// other package resolves from the plugin's folder; a plugin that does not load gets one line
// naming its file and what to do.
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { configFile, run } from '../../helpers/cli.js';

/** A folder of the user's own, outside the repository, with these files in it. */
function userFolder(files: Record<string, string>): string {
  const root = mkdtempSync(join(tmpdir(), 'gw-user-plugin-'));
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(join(root, path, '..'), { recursive: true });
    writeFileSync(join(root, path), text);
  }
  return root;
}

const plugin = (name: string, head = '') =>
  `import { definePlugin } from 'inference-gateway';\n${head}\nexport default definePlugin({ name: ${name}, schema: { type: 'object' }, apply() {} });\n`;

let root: string;
let out: string;
beforeAll(async () => {
  root = userFolder({
    'api.mjs': plugin(
      "typeof INFERENCE_API.contextLengthError === 'function' ? 'both-imports' : 'no-inference-api'",
      "import { INFERENCE_API } from 'inference-gateway/inference-api';",
    ),
    // Another copy of the package (an old install, say): its definePlugin would rename the plugin.
    'own-copy/node_modules/inference-gateway/package.json': JSON.stringify({ name: 'inference-gateway', type: 'module', exports: { '.': './api.js' } }),
    'own-copy/node_modules/inference-gateway/api.js': "export const definePlugin = (p) => ({ ...p, name: 'from-the-other-copy' });\n",
    'own-copy/mine.mjs': plugin("'mine'"),
    'dep/node_modules/greeting/package.json': JSON.stringify({ name: 'greeting', type: 'module', exports: './index.js' }),
    'dep/node_modules/greeting/index.js': "export const word = 'hello';\n",
    // biome-ignore lint/suspicious/noTemplateCurlyInString: the plugin's own source, a template literal
    'dep/greets.mjs': plugin('`greets-${word}`', "import { word } from 'greeting';"),
    'missing/needs-dep.mjs': plugin("'needs-dep'", "import pad from 'no-such-dep-xyz';"),
    'boom.mjs': plugin("'boom'", "\nthrow new Error('no config for boom');"),
    'syntax.mjs': "export default {\n  name: 'x',,\n};\n",
  });
  const plugins = ['api.mjs', 'own-copy/mine.mjs', 'dep/greets.mjs', 'missing/needs-dep.mjs', 'boom.mjs', 'syntax.mjs'].map((f) => join(root, f));
  const r = await run(['validate', '--config', configFile(`plugins: ${JSON.stringify(plugins)}\n`)]);
  out = r.out;
});

const lineOf = (file: string) =>
  out
    .split('\n')
    .find((l) => l.startsWith(`PASS plugin ${join(root, file)}:`) || (l.startsWith(`FAIL plugin plugins[`) && l.includes(` ${join(root, file)}: `)));

describe('a plugin in a folder of its own', () => {
  it('imports inference-gateway and its subpath exports with nothing installed', () => {
    expect(lineOf('api.mjs')).toBe(`PASS plugin ${join(root, 'api.mjs')}: both-imports`);
  });

  it('gets the running gateway even when a copy of its own is in its node_modules', () => {
    expect(lineOf('own-copy/mine.mjs')).toBe(`PASS plugin ${join(root, 'own-copy/mine.mjs')}: mine`);
  });

  it('resolves any other package from its own folder, as Node does', () => {
    expect(lineOf('dep/greets.mjs')).toBe(`PASS plugin ${join(root, 'dep/greets.mjs')}: greets-hello`);
  });
});

describe('a plugin that does not load: one line, its file, what to do', () => {
  it('a package it imports is not installed: which, and where to install it', () => {
    const file = join(root, 'missing/needs-dep.mjs');
    expect(lineOf('missing/needs-dep.mjs')).toBe(
      `FAIL plugin plugins[3] ${file}: cannot load ${file}: Cannot find package 'no-such-dep-xyz' imported from ${file} — fix: install it for the plugin: npm install no-such-dep-xyz in ${join(root, 'missing')} (inference-gateway itself needs no install)`,
    );
  });

  it('it throws as it loads: the line where', () => {
    const file = join(root, 'boom.mjs');
    expect(lineOf('boom.mjs')).toBe(
      `FAIL plugin plugins[4] ${file}: cannot load ${file}: no config for boom (at ${file}:3:7) — fix: fix the plugin, or remove it from plugins: in the config`,
    );
  });

  it('a syntax error: how to find the line', () => {
    const file = join(root, 'syntax.mjs');
    expect(lineOf('syntax.mjs')).toBe(
      `FAIL plugin plugins[5] ${file}: cannot load ${file}: SyntaxError: Unexpected token ',' — fix: node --check ${file} shows the line (or the file it imports that has it)`,
    );
  });

  it('the rest of the check goes on, and the summary counts each failure once', () => {
    expect(out).toMatch(/^summary: \d+ passed, 0 warnings, 3 failed$/m);
  });
});
