// Pipelines as users edit them: the YAML order is checked (a step listed before what it needs
// fails `gw validate`, naming what is missing and where it comes from), a pipeline can replace
// the proxy pipeline for some families only, and the shared steps wrap every pipeline.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { FakeBackend } from '../../../engine/demo/index.js';
import { validate } from '../../../engine/kernel/validate.js';
import { BUILTIN_PLUGINS } from '../../../plugins/index.js';
import { closeAll, endpoint, startGateway, writeConfig, type Started } from '../../helpers/gateway.js';

function pipelineDir(files: Record<string, string>): string {
  const dir = mkdtempSync(join(tmpdir(), 'gw-pipelines-'));
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
  return dir;
}

async function validateWith(files: Record<string, string>): Promise<{ code: number; lines: string[] }> {
  const lines: string[] = [];
  const config = writeConfig({ pipelines: { dir: pipelineDir(files) }, discovery: { static: { endpoints: [] } } });
  const code = await validate(config, {}, (l) => lines.push(l), BUILTIN_PLUGINS);
  return { code, lines };
}

const proxy = (steps: string[]) => `name: proxy\nmount: { per_profile: true }\nsteps:\n${steps.map((s) => `  - use: ${s}\n`).join('')}`;

let gw: Started | null = null;
let fakes: FakeBackend[] = [];
afterEach(async () => {
  await closeAll(gw, fakes);
  [gw, fakes] = [null, []];
});

describe('YAML order is checked', () => {
  it('fails a pipeline whose steps are listed backwards, naming the missing input and its provider', async () => {
    const { code, lines } = await validateWith({ 'proxy.yaml': proxy(['forward', 'select-endpoint', 'alias-resolve', 'read-body', 'match-prefix']) });
    expect(code).toBe(1);
    const fails = lines.filter((l) => l.startsWith('FAIL pipeline proxy'));
    expect(fails.join('\n')).toContain(
      '/steps/0: forward needs path, which match-prefix (/steps/4) provides only later — fix: move match-prefix above forward: YAML order is the order steps run',
    );
    expect(fails.join('\n')).toContain('/steps/1: select-endpoint needs body, which read-body (/steps/3) provides only later');
    expect(fails.join('\n')).toContain('/steps/1: select-endpoint uses aliases, which alias-resolve (/steps/2) provides only later');
  });

  it('fails an allowlist before the prefix match (every route would answer 404)', async () => {
    const { code, lines } = await validateWith({
      'proxy.yaml': proxy(['allowlist', 'match-prefix', 'read-body', 'select-endpoint', 'upstream-headers', 'forward']),
    });
    expect(code).toBe(1);
    expect(lines).toContainEqual(expect.stringContaining('/steps/0: allowlist needs path, which match-prefix (/steps/1) provides only later'));
  });

  it('fails a step that needs something no step provides, saying which plugin does', async () => {
    const { lines } = await validateWith({ 'proxy.yaml': proxy(['match-prefix', 'select-endpoint', 'forward']) });
    expect(lines).toContainEqual(expect.stringContaining('select-endpoint needs body, which no earlier step provides — fix: add read-body above it'));
  });

  it('fails a step listed after one of a later phase', async () => {
    const { lines } = await validateWith({ 'proxy.yaml': proxy(['match-prefix', 'read-body', 'select-endpoint', 'forward', 'upstream-headers']) });
    expect(lines).toContainEqual(
      expect.stringContaining(
        '/steps/4: upstream-headers runs in the upstream (when the terminal step sends) phase, but is listed after forward (/steps/3), which runs later (terminal)',
      ),
    );
  });

  it('passes a pipeline that lists a shared step of a later phase itself, and a path mount that forwards its own path', async () => {
    const { code, lines } = await validateWith({
      'm.yaml': 'name: my-models\nmount: { paths: [/my/models] }\nsteps:\n  - use: cors\n  - use: models-list\n  - use: access-log\n',
      'f.yaml': 'name: my-forward\nmount: { paths: [/v1/chat/completions] }\nsteps:\n  - use: read-body\n  - use: select-endpoint\n  - use: forward\n',
    });
    expect(lines.filter((l) => l.startsWith('FAIL'))).toEqual([]);
    expect(code).toBe(0);
  });

  it('passes the built-in pipelines', async () => {
    const { code, lines } = await validateWith({});
    expect(lines.filter((l) => l.startsWith('FAIL'))).toEqual([]);
    expect(code).toBe(0);
  });
});

describe('a pipeline for some families only', () => {
  it('replaces the proxy pipeline for cppengine (no allowlist) and leaves the other families alone', async () => {
    fakes = [await new FakeBackend({ family: 'cppengine', name: 'cpp' }).start(), await new FakeBackend({ family: 'pagedengine', name: 'paged' }).start()];
    const dir = pipelineDir({
      'proxy-cppengine.yaml':
        'name: proxy-cppengine\nmount: { per_profile: true, families: [cppengine] }\nsteps:\n  - use: match-prefix\n  - use: read-body\n  - use: select-endpoint\n  - use: upstream-headers\n  - use: forward\n',
    });
    gw = await startGateway({
      pipelines: { dir },
      discovery: { static: { endpoints: [endpoint('cpp', 'cppengine', fakes[0].url), endpoint('paged', 'pagedengine', fakes[1].url)] } },
    });
    const cpp = await request(`${gw.url}/gw/cppengine/props`);
    expect(cpp.statusCode).toBe(200);
    expect(((await cpp.body.json()) as any).path).toBe('/props');
    const paged = await request(`${gw.url}/gw/pagedengine/props`);
    expect(paged.statusCode).toBe(404);
    expect(((await paged.body.json()) as any).error.code).toBe('PATH_NOT_ALLOWED');
    // The shared steps wrap it (stats: proxy-* pipelines count as proxy traffic).
    expect(cpp.headers['x-gw-endpoint']).toBe('cpp');
    expect(gw.gw.runtime.stats.requestsTotal).toBeGreaterThan(0);
  });

  it('fails a family that two pipelines claim, or one that does not exist', async () => {
    const step = 'steps:\n  - use: match-prefix\n  - use: read-body\n  - use: select-endpoint\n  - use: forward\n';
    const { lines } = await validateWith({
      'a.yaml': `name: proxy-a\nmount: { per_profile: true, families: [cppengine] }\n${step}`,
      'b.yaml': `name: proxy-b\nmount: { per_profile: true, families: [cppengine, cppengin] }\n${step}`,
    });
    expect(lines).toContainEqual(expect.stringContaining('family cppengine is already claimed by pipeline proxy-a'));
    expect(lines).toContainEqual(expect.stringContaining('unknown family "cppengin" — fix: did you mean "cppengine"?'));
  });

  it('fills one route for the families that lack it, claiming no family; fills needs per_profile', async () => {
    const steps = 'steps:\n  - use: match-prefix\n  - use: read-body\n  - use: select-endpoint\n  - use: upstream-headers\n  - use: forward\n';
    fakes = [await new FakeBackend({ family: 'cppengine', name: 'cpp' }).start(), await new FakeBackend({ family: 'mlxsingle', name: 'mlx' }).start()];
    const dir = pipelineDir({
      // /v1/rerank: llama.cpp lists it, mlx-lm does not; this pipeline forwards it there anyway.
      'rerank.yaml': `name: rerank-filled\nmount: { per_profile: true, fills: /v1/rerank, families: [mlxsingle, cppengine], methods: [POST] }\n${steps}`,
    });
    gw = await startGateway({
      pipelines: { dir },
      discovery: { static: { endpoints: [endpoint('cpp', 'cppengine', fakes[0].url), endpoint('mlx', 'mlxsingle', fakes[1].url)] } },
    });
    // Mounted for mlx-lm only (under its two prefixes, mlxsingle and mlx-lm): llama.cpp serves the route itself.
    const checked = await validateWith({
      'rerank.yaml': `name: rerank-filled\nmount: { per_profile: true, fills: /v1/rerank, families: [mlxsingle, cppengine], methods: [POST] }\n${steps}`,
    });
    expect(checked.lines).toContainEqual(expect.stringMatching(/PASS pipeline rerank-filled .*: 2 routes$/));
    const filled = await request(`${gw.url}/gw/mlxsingle/v1/rerank`, { method: 'POST', body: '{}', headers: { 'content-type': 'application/json' } });
    await filled.body.dump();
    expect(filled.headers['x-gw-endpoint']).toBe('mlx');
    expect(fakes[1].traffic.at(-1)!.url).toBe('/v1/rerank');
    // The rest of mlxsingle's prefix is still its proxy pipeline (the allowlist answers).
    const other = await request(`${gw.url}/gw/mlxsingle/props`);
    expect(((await other.body.json()) as any).error.code).toBe('PATH_NOT_ALLOWED');
    const { lines } = await validateWith({ 'bad.yaml': `name: bad-fill\nmount: { fills: /v1/rerank, paths: [/x] }\n${steps}` });
    expect(lines).toContainEqual(expect.stringContaining('fills applies to per-profile mounts only'));
  });
});

describe('shared steps', () => {
  it('add a config step to every route but the pipelines it excepts', async () => {
    fakes = [await new FakeBackend({ family: 'pagedengine', name: 'paged' }).start()];
    gw = await startGateway({
      plugins: [join(process.cwd(), 'test/fixtures/plugins/tag-reply.mjs')],
      pipelines: { after: [{ use: 'tag-reply', with: { value: 'seen' }, except: ['version'] }] },
      discovery: { static: { endpoints: [endpoint('paged', 'pagedengine', fakes[0].url)] } },
    });
    for (const path of ['/gw/pagedengine/v1/models', '/gw/models', '/internal/status']) {
      const res = await request(`${gw.url}${path}`);
      await res.body.dump();
      expect(res.headers['x-tag'], path).toBe('seen');
    }
    const version = await request(`${gw.url}/version`);
    await version.body.dump();
    expect(version.headers['x-tag']).toBeUndefined();
  });
});
