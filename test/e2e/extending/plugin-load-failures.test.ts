// One cause, one line: a plugin that does not load is reported once, with its file and the fix;
// the steps that name it point back to it instead of failing once per pipeline; an unknown step
// name gets the closest name, never the list of every plugin.
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { run } from '../../helpers/cli.js';

/** A user's folder with a config and these files; commands run from it. */
function folder(config: string, files: Record<string, string> = {}): string {
  const dir = mkdtempSync(join(tmpdir(), 'gw-plugin-fail-'));
  writeFileSync(join(dir, 'config.yaml'), config);
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(join(dir, path, '..'), { recursive: true });
    writeFileSync(join(dir, path), text);
  }
  return dir;
}

const failLines = (out: string) => out.split('\n').filter((l) => l.startsWith('FAIL '));
// Two built-in names side by side: the start of the list of every plugin.
const EVERY_PLUGIN = /access-log, alias-resolve/;

const NEEDS_LODASH =
  "import _ from 'lodash-not-installed';\nimport { definePlugin } from 'inference-gateway';\nexport default definePlugin({ name: 'api-key', schema: { type: 'object' }, apply() {} });\n";

describe('gw validate', () => {
  it('reports a plugin that does not load once, and the steps that name it once, without the plugin list', async () => {
    const dir = folder('plugins: [./plugins/require-key.mjs]\npipelines: { before: [api-key] }\n', { 'plugins/require-key.mjs': NEEDS_LODASH });
    const file = join(dir, 'plugins', 'require-key.mjs');
    const r = await run(['validate', '--config', 'config.yaml'], { cwd: dir });
    expect(r.code).toBe(1);
    expect(failLines(r.out)).toEqual([
      `FAIL plugin plugins[0] ./plugins/require-key.mjs: cannot load ${file}: Cannot find package 'lodash-not-installed' imported from ${file} — fix: install it for the plugin: npm install lodash-not-installed in ${join(dir, 'plugins')} (inference-gateway itself needs no install)`,
    ]);
    // The steps that name it, once, under it: not a second failure.
    expect(r.out).toMatch(
      /^ {2}↳ config config\.yaml: pipelines\.before\[0\]\/use: unknown plugin "api-key" \(in \d+ pipelines: [a-z-]+, [a-z-]+, [a-z-]+, …\) — fix: plugins\[0\] \.\/plugins\/require-key\.mjs did not load \(see above\); fix that first$/m,
    );
    expect(r.out).not.toMatch(EVERY_PLUGIN);
    expect(r.out).toMatch(/^summary: \d+ passed, 0 warnings, 1 failed$/m);
  });

  it('gives a misspelt shared step the closest name, once', async () => {
    const dir = folder('plugins: [./api-key.mjs]\npipelines: { before: [api-kee] }\n', {
      'api-key.mjs':
        "import { definePlugin } from 'inference-gateway';\nexport default definePlugin({ name: 'api-key', schema: { type: 'object' }, apply() {} });\n",
    });
    const r = await run(['validate', '--config', 'config.yaml'], { cwd: dir });
    expect(failLines(r.out)).toEqual([
      expect.stringMatching(
        /^FAIL config config\.yaml: pipelines\.before\[0\]\/use: unknown plugin "api-kee" \(in \d+ pipelines: .*\) — fix: did you mean "api-key"\?$/,
      ),
    ]);
    expect(r.out).toContain('PASS plugin ./api-key.mjs: api-key');
  });

  it('says how to find a plugin for a name like none it knows, without listing them all', async () => {
    const dir = folder('pipelines: { dir: ./pipelines }\n', {
      'pipelines/hello.yaml': 'name: hello\nmount: { paths: [/hello] }\nsteps:\n  - use: frobnicate\n  - use: version\n',
    });
    const r = await run(['validate', '--config', 'config.yaml'], { cwd: dir });
    expect(failLines(r.out)).toEqual([
      'FAIL pipeline hello (pipelines/hello.yaml): /steps/0/use: unknown plugin "frobnicate" — fix: no built-in or loaded plugin has this name: check the spelling (docs/reference/pipelines-and-plugins.md, "Built-in steps"), or list the file that provides it under plugins: in the config',
    ]);
    expect(r.out).not.toMatch(EVERY_PLUGIN);
  });
});

describe('gw serve', () => {
  it('stops on a plugin that does not load with one error: the config, the file, the fix', async () => {
    const dir = folder('plugins: [./plugins/require-key.mjs]\npipelines: { before: [api-key] }\n', { 'plugins/require-key.mjs': NEEDS_LODASH });
    const r = await run(['serve', '--config', 'config.yaml'], { cwd: dir });
    expect(r.code).toBe(1);
    const file = join(dir, 'plugins', 'require-key.mjs');
    expect(r.err.trim()).toBe(
      `gw: configuration error in ${join(dir, 'config.yaml')} (plugins[0]): plugin ./plugins/require-key.mjs: cannot load ${file}: Cannot find package 'lodash-not-installed' imported from ${file}\n  fix: install it for the plugin: npm install lodash-not-installed in ${join(dir, 'plugins')} (inference-gateway itself needs no install)`,
    );
  });

  it('names the config, not a pipeline, for a shared step it does not know', async () => {
    const dir = folder('pipelines: { before: [frobnicate] }\n');
    const r = await run(['serve', '--config', 'config.yaml'], { cwd: dir });
    expect(r.code).toBe(1);
    expect(r.err).toContain(`gw: configuration error in ${join(dir, 'config.yaml')} (pipelines.before[0]/use): unknown plugin "frobnicate"`);
    expect(r.err).not.toMatch(EVERY_PLUGIN);
  });
});
