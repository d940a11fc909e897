// Pipelines compile once: known plugins, validated options, exactly one terminal step, YAML
// order as tap order, third-party plugins under the same contract.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { request } from 'undici';
import { checkPipelines } from '../../../engine/core/pipelines.js';
import { PluginRegistry } from '../../../engine/kernel/plugin.js';
import { BUILTIN_PLUGINS } from '../../../plugins/index.js';
import { FakeBackend } from '../../../engine/demo/index.js';
import { endpoint, startGateway } from '../../helpers/gateway.js';

function pipelineDir(files: Record<string, string>): string {
  const dir = mkdtempSync(join(tmpdir(), 'gw-pipelines-'));
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
  return dir;
}

const startWith = (dir: string, extra: Record<string, unknown> = {}) =>
  startGateway({ pipelines: { dir }, discovery: { static: { endpoints: [] } }, ...extra });

describe('pipeline compilation', () => {
  it('refuses a pipeline without a terminal step, naming the file', async () => {
    const dir = pipelineDir({ 'x.yaml': 'name: x\nmount: { paths: [/x] }\nsteps:\n  - use: cors\n' });
    await expect(startWith(dir)).rejects.toThrow(/x\.yaml \(\/steps\): no terminal step/);
  });

  it('refuses two terminal steps', async () => {
    const dir = pipelineDir({ 'x.yaml': 'name: x\nmount: { paths: [/x] }\nsteps:\n  - use: version\n  - use: health-report\n' });
    await expect(startWith(dir)).rejects.toThrow(/2 terminal steps: version \(\/steps\/0\), health-report \(\/steps\/1\)/);
  });

  it('suggests the right name for a misspelled plugin', async () => {
    const dir = pipelineDir({ 'x.yaml': 'name: x\nmount: { paths: [/x] }\nsteps:\n  - use: verson\n' });
    await expect(startWith(dir)).rejects.toThrow(/\/steps\/0\/use\): unknown plugin "verson"[\s\S]*did you mean "version"/);
  });

  it('validates step options with the JSON pointer of the bad value', async () => {
    const proxy = 'name: proxy\nmount: { per_profile: true }\nsteps:\n  - use: allowlist\n    with: { status: 418 }\n  - use: forward\n';
    await expect(startWith(pipelineDir({ 'proxy.yaml': proxy }))).rejects.toThrow(
      /proxy\.yaml \(\/steps\/0\/with\/status\): allowlist: value 418 is not allowed/,
    );
  });

  it('refuses a family plugin on a plain path mount', async () => {
    const dir = pipelineDir({ 'x.yaml': 'name: x\nmount: { paths: [/x] }\nsteps:\n  - use: allowlist\n  - use: forward\n' });
    await expect(startWith(dir)).rejects.toThrow(/allowlist works on a backend family/);
  });

  it('refuses two pipelines on one route', async () => {
    const dir = pipelineDir({ 'x.yaml': 'name: x\nmount: { paths: [/version] }\nsteps:\n  - use: version\n' });
    await expect(startWith(dir)).rejects.toThrow(/route GET \/version is already mounted by pipeline/);
  });

  it('lets a custom pipeline replace a built-in by name', () => {
    const dir = pipelineDir({ 'v.yaml': 'name: version\nmount: { paths: [/v2/version] }\nsteps:\n  - use: version\n' });
    const { pipelines, files } = checkPipelines(dir);
    expect(pipelines.find((p) => p.name === 'version')!.mount.paths).toEqual(['/v2/version']);
    expect(files.find((f) => f.file.endsWith('v.yaml'))!.replaces).toMatch(/pipelines\/version\.yaml$/);
  });

  it('runs steps in YAML order: an edited pipeline changes behaviour without code, and keeps the shared steps', async () => {
    const fake = await new FakeBackend({ family: 'localrunner' }).start();
    // No allowlist step: every path is forwarded.
    const dir = pipelineDir({
      'proxy.yaml':
        'name: proxy\nmount: { per_profile: true }\nsteps:\n  - use: match-prefix\n  - use: read-body\n  - use: select-endpoint\n  - use: upstream-headers\n  - use: forward\n',
    });
    const gw = await startGateway({ pipelines: { dir }, discovery: { static: { endpoints: [endpoint('l', 'localrunner', fake.url)] } } });
    try {
      const res = await request(`${gw.url}/gw/localrunner/anything/at/all`);
      expect(res.statusCode).toBe(200);
      expect(((await res.body.json()) as any).path).toBe('/anything/at/all');
      // The shared steps (pipelines/shared.yaml) wrap a user's pipeline too.
      expect(res.headers['x-gw-endpoint']).toBe('l');
      expect(res.headers['access-control-allow-origin']).toBe('*');
    } finally {
      await gw.close();
      await fake.stop();
    }
  });
});

describe('third-party plugins', () => {
  it('load from a path and run under the same contract', async () => {
    const plugin = resolve('test/fixtures/plugins/tag-reply.mjs');
    const dir = pipelineDir({
      'v.yaml': 'name: version\nmount: { paths: [/version] }\nsteps:\n  - use: version\n  - use: tag-reply\n    with: { value: hello }\n',
    });
    const gw = await startGateway({ plugins: [plugin], pipelines: { dir }, discovery: { static: { endpoints: [] } } });
    try {
      const res = await request(`${gw.url}/version`);
      await res.body.json();
      expect(res.headers['x-tag']).toBe('hello');
    } finally {
      await gw.close();
    }
  });

  it('report a missing module, a broken contract and a name clash', async () => {
    const registry = new PluginRegistry(BUILTIN_PLUGINS);
    const dir = mkdtempSync(join(tmpdir(), 'gw-plugins-'));
    writeFileSync(join(dir, 'bad.mjs'), 'export default { name: "Bad Name", schema: {}, apply() {} };');
    writeFileSync(join(dir, 'clash.mjs'), 'export default { name: "forward", schema: {}, apply() {} };');
    const results = await registry.loadThirdParty(['./nope.mjs', join(dir, 'bad.mjs'), join(dir, 'clash.mjs'), 'no-such-package-xyz']);
    expect(results.map((r) => [r.error, r.fix])).toEqual([
      [
        `cannot load: ${join(process.cwd(), 'nope.mjs')} does not exist (relative paths resolve against the working directory, ${process.cwd()})`,
        'correct the path in plugins: or run the gateway from the folder it is relative to',
      ],
      ['plugin name "Bad Name" must be kebab-case (e.g. my-plugin)', undefined],
      ['plugin name forward is already taken by a built-in plugin; rename it', undefined],
      [
        'cannot load: package no-such-package-xyz is not installed',
        `npm install no-such-package-xyz in ${process.cwd()} (package names resolve from the working directory), or name the plugin's file or folder by its path`,
      ],
    ]);
    expect(registry.failed.map((f) => f.index)).toEqual([0, 1, 2, 3]);
  });
});
