import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { request } from 'undici';
import { BUILTIN_PROFILES_DIR } from '../../../engine/core/paths.js';
import { checkProfiles, loadProfiles, mountedPrefixes } from '../../../engine/core/profiles.js';
import { startGateway } from '../../helpers/gateway.js';

const builtins = loadProfiles('/nonexistent');

describe('built-in profiles', () => {
  it('name the engines each family is for, and the family table of docs/reference/profiles.md says the same', () => {
    const readme = readFileSync('docs/reference/profiles.md', 'utf8').split('\n');
    for (const p of builtins.list) {
      expect(p.engines.length, `${p.name}: profiles/${p.name}.yaml needs engines`).toBeGreaterThan(0);
      const row = readme.find((l) => l.startsWith(`| \`${p.name}\``) || l.startsWith(`| \`${p.type_aliases[0]}\`, \`${p.name}\``));
      expect(row, `docs/reference/profiles.md family table needs a row for ${p.name}`).toBeDefined();
      expect(row!.split(' | ')[1], `docs/reference/profiles.md family table, ${p.name}: engines as in profiles/${p.name}.yaml`).toBe(p.engines.join(', '));
    }
  });

  it('has the 12 families with their prefixes, and auto', () => {
    const prefixes = Object.fromEntries(builtins.list.map((p) => [p.name, p.routing.prefixes]));
    expect(prefixes).toEqual({
      auto: ['auto'],
      containerrunner: ['containerrunner'],
      cppengine: ['cppengine'],
      deskrunner: ['deskrunner', 'desk-runner', 'desk_runner'],
      'hosted-compatible': ['hosted', 'hosted-compatible'],
      localrunner: ['localrunner'],
      mlxmulti: ['mlxmulti'],
      mlxsingle: ['mlxsingle'],
      multigateway: ['multigateway'],
      npuengine: ['npuengine'],
      pagedengine: ['pagedengine'],
      radixengine: ['radixengine'],
      turboengine: ['turboengine'],
    });
    expect(builtins.byName.get('cppengine')!.routing.optional_prefixes).toEqual(['cpp-engine', 'cpp_engine']);
  });

  it("mounts the engines' own names as prefixes where no other route has them, each a name the family takes as a type", () => {
    const engines = Object.fromEntries(builtins.list.filter((p) => p.routing.engine_prefixes.length).map((p) => [p.name, p.routing.engine_prefixes]));
    expect(engines).toEqual({
      containerrunner: ['docker-model-runner'],
      cppengine: ['llamacpp', 'llama.cpp', 'llama-cpp'],
      deskrunner: ['lmstudio', 'lm-studio'],
      localrunner: ['ollama'],
      mlxsingle: ['mlx-lm'],
      multigateway: ['litellm'],
      npuengine: ['lemonade'],
      pagedengine: ['vllm'],
      radixengine: ['sglang'],
      turboengine: ['lmdeploy'],
    });
    for (const p of builtins.list) for (const name of p.routing.engine_prefixes) expect(p.type_aliases, p.name).toContain(name);
    // openai names hosted-compatible as a type, but /gw/openai/ is the route over every family.
    expect(builtins.byName.get('hosted-compatible')!.routing.engine_prefixes).toEqual([]);
    expect(mountedPrefixes(builtins.byName.get('cppengine')!, false)).toEqual(['cppengine', 'llamacpp', 'llama.cpp', 'llama-cpp']);
    expect(mountedPrefixes(builtins.byName.get('cppengine')!, true)).toEqual(['cppengine', 'llamacpp', 'llama.cpp', 'llama-cpp', 'cpp-engine', 'cpp_engine']);
  });

  it('uses the spec defaults for health and model paths', () => {
    const table: Record<string, [string, string]> = {
      localrunner: ['/', '/api/tags'],
      cppengine: ['/health', '/v1/models'],
      deskrunner: ['/v1/models', '/api/v0/models'],
      pagedengine: ['/health', '/v1/models'],
      radixengine: ['/health', '/v1/models'],
      'hosted-compatible': ['/v1/models', '/v1/models'],
      npuengine: ['/api/v1/health', '/api/v1/models'],
      mlxmulti: ['/health', '/v1/models'],
      mlxsingle: ['/health', '/v1/models'],
      turboengine: ['/health', '/v1/models'],
      containerrunner: ['/engines/v1/models', '/engines/v1/models'],
      auto: ['/', '/v1/models'],
    };
    for (const [name, [health, models]] of Object.entries(table)) {
      expect([name, builtins.byName.get(name)!.api.health_check_path, builtins.byName.get(name)!.api.model_discovery_path]).toEqual([name, health, models]);
    }
  });

  it('declares msgapi support and minimum versions as the spec lists them', () => {
    const support = (n: string) => builtins.byName.get(n)!.api.msgapi_support;
    expect(support('pagedengine')).toMatchObject({ enabled: true, min_version: '0.11.1', token_count: false });
    expect(support('cppengine')).toMatchObject({ enabled: true, min_version: 'b4847', token_count: true });
    expect(support('deskrunner')).toMatchObject({ enabled: true, min_version: '0.4.1' });
    expect(support('localrunner')).toMatchObject({ enabled: true, min_version: '0.14.0' });
    expect(support('hosted-compatible')).toBeUndefined();
  });

  it('keeps allowlists exact and every path absolute', () => {
    for (const p of builtins.list) for (const path of p.api.paths) expect(path).toMatch(/^\/[^*]*$/);
    expect(builtins.byName.get('containerrunner')!.api.paths).toContain('/engines/paged/v1/chat/completions');
  });
});

describe('custom profiles', () => {
  it('replace a built-in of the same name completely', () => {
    const dir = mkdtempSync(join(tmpdir(), 'gw-profiles-'));
    writeFileSync(join(dir, 'mine.yaml'), 'name: localrunner\nversion: "1.0"\nrouting: { prefixes: [ollama] }\napi: { paths: [/api/tags] }\n');
    const { profiles, files } = checkProfiles(dir);
    const p = profiles!.byName.get('localrunner')!;
    expect(p.routing.prefixes).toEqual(['ollama']);
    expect(p.api.paths).toEqual(['/api/tags']);
    expect(p.request.forward_host_headers).toBe(false);
    expect(files.find((f) => f.file.endsWith('mine.yaml'))!.replaces).toMatch(/profiles\/localrunner\.yaml$/);
  });

  it('add a new family', () => {
    const dir = mkdtempSync(join(tmpdir(), 'gw-profiles-'));
    writeFileSync(join(dir, 'new.yaml'), 'name: myengine\nversion: "1.0"\nrouting: { prefixes: [myengine] }\napi: { paths: [/v1/models] }\n');
    expect(checkProfiles(dir).profiles!.byType.get('myengine')!.name).toBe('myengine');
  });

  it('report a broken file by name and field', () => {
    const dir = mkdtempSync(join(tmpdir(), 'gw-profiles-'));
    writeFileSync(join(dir, 'bad.yaml'), 'name: bad\nversion: "2.0"\nroutting: { prefixes: [x] }\napi: {}\n');
    const { profiles, files } = checkProfiles(dir);
    expect(profiles).toBeUndefined();
    const bad = files.find((f) => f.file.endsWith('bad.yaml'))!;
    expect(bad.problems.map((p) => p.field).sort()).toEqual(['(top level)', 'routting', 'version']);
    expect(bad.problems.find((p) => p.field === 'routting')!.fix).toContain('did you mean "routing"');
    expect(() => loadProfiles(dir)).toThrow(/bad\.yaml/);
  });

  it('keep a profile whose model patterns cannot be read, ignoring the patterns with a warning (path and error)', () => {
    const dir = mkdtempSync(join(tmpdir(), 'gw-profiles-'));
    writeFileSync(
      join(dir, 'mine.yaml'),
      'name: localrunner\nversion: "1.0"\nrouting: { prefixes: [ollama] }\napi: { paths: [/api/tags] }\nmodels:\n  context_patterns:\n    - { pattern: "*llama*", context: big }\n  capability_patterns: { vision: "*llava*" }\n',
    );
    const { profiles, files } = checkProfiles(dir);
    const p = profiles!.byName.get('localrunner')!;
    expect(p.routing.prefixes).toEqual(['ollama']);
    expect(p.models).toEqual({ capability_patterns: {}, context_patterns: [], provider_prefixed: false });
    const mine = files.find((f) => f.file.endsWith('mine.yaml'))!;
    expect(mine.problems.map((x) => `${x.level} ${x.field}`).sort()).toEqual([
      'warn models.capability_patterns.vision',
      'warn models.context_patterns[0].context',
    ]);
    expect(mine.problems[0].message).toContain('the model patterns of this profile are ignored');
    // Anything else wrong in the file still fails it.
    writeFileSync(join(dir, 'mine.yaml'), 'name: localrunner\nversion: "2.0"\nrouting: { prefixes: [ollama] }\napi: {}\nmodels: { context_patterns: oops }\n');
    expect(checkProfiles(dir).profiles).toBeUndefined();
  });

  it('with broken model patterns do not stop the gateway: it starts and logs a warning naming the file and the error', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'gw-profiles-'));
    const file = join(dir, 'localrunner.yaml');
    const builtin = readFileSync(join(BUILTIN_PROFILES_DIR, 'localrunner.yaml'), 'utf8');
    writeFileSync(file, builtin.replace(/context_patterns:\n( {4}- .*\n)+/, 'context_patterns:\n    - { pattern: "*llama3.1*", context: "a lot" }\n'));
    const gw = await startGateway({ proxy: { profiles_dir: dir } });
    try {
      const res = await request(`${gw.url}/internal/health`);
      await res.body.dump();
      expect(res.statusCode).toBe(200);
      const warning = gw.logs.find((l) => l.level === 40 && l.file === file);
      expect(warning).toMatchObject({ field: 'models.context_patterns[0].context' });
      expect(warning!.msg).toContain('must be integer');
      expect(warning!.msg).toContain('the model patterns of this profile are ignored');
    } finally {
      await gw.close();
    }
  });

  it('refuse a prefix claimed by two families', () => {
    const dir = mkdtempSync(join(tmpdir(), 'gw-profiles-'));
    writeFileSync(join(dir, 'dup.yaml'), 'name: other\nversion: "1.0"\nrouting: { prefixes: [pagedengine] }\napi: {}\n');
    const { files } = checkProfiles(dir);
    expect(files.flatMap((f) => f.problems).some((p) => p.message.includes('prefix "pagedengine" is already used'))).toBe(true);
  });
});

describe('profile fields the gateway acts on or refuses (none accepted and ignored)', () => {
  /** Problems of one custom profile file with `body` after the required keys. */
  function problemsOf(body: string) {
    const dir = mkdtempSync(join(tmpdir(), 'gw-profiles-'));
    writeFileSync(join(dir, 'p.yaml'), `name: p\nversion: "1.0"\nrouting: { prefixes: [p] }\n${body}`);
    const { profiles, files } = checkProfiles(dir);
    return { profiles, file: files.find((f) => f.file.endsWith('p.yaml'))! };
  }

  it('path_indices: an index outside api.paths fails, naming the field and the valid range', () => {
    const { profiles, file } = problemsOf('api: { paths: [/a, /b, /c] }\npath_indices: { chat: 1, embed: 3 }\n');
    expect(profiles).toBeUndefined();
    expect(file.problems).toEqual([
      { level: 'fail', field: 'path_indices.embed', message: 'index 3 is outside api.paths, which has 3 entries', fix: 'use an index from 0 to 2' },
    ]);
    expect(problemsOf('api: { paths: [/a] }\npath_indices: { chat: 0 }\n').file.problems).toEqual([]);
  });

  it('models.name_format: only the forms that mean "the name as listed" load', () => {
    const bad = problemsOf('api: { paths: [/a] }\nmodels: { name_format: "{{.Family}}-{{.Name}}" }\n').file.problems;
    expect(bad).toEqual([
      expect.objectContaining({
        level: 'fail',
        field: 'models.name_format',
        message: expect.stringContaining('is not supported: the gateway shows model names exactly as the backend lists them'),
      }),
    ]);
    expect(bad[0].fix).toContain('"{{.Name}}" or "{{.Namespace}}/{{.Name}}"');
    for (const ok of ['{{.Name}}', '{{.Namespace}}/{{.Name}}'])
      expect(problemsOf(`api: { paths: [/a] }\nmodels: { name_format: "${ok}" }\n`).file.problems).toEqual([]);
  });

  it('request.model_field_paths: nested paths and an empty list fail; top-level names load', () => {
    expect(problemsOf('api: { paths: [/a] }\nrequest: { model_field_paths: [model, params.model] }\n').file.problems).toEqual([
      expect.objectContaining({
        level: 'fail',
        field: 'request.model_field_paths[1]',
        message: expect.stringContaining('"params.model" is not a top-level field name'),
      }),
    ]);
    expect(problemsOf('api: { paths: [/a] }\nrequest: { model_field_paths: [] }\n').file.problems[0]).toMatchObject({
      field: 'request.model_field_paths',
      level: 'fail',
    });
    expect(problemsOf('api: { paths: [/a] }\nrequest: { model_field_paths: [model, name] }\n').file.problems).toEqual([]);
  });

  it('route kinds: a path in two lists fails; a path outside api.paths warns', () => {
    const { file } = problemsOf('api: { paths: [/gen, /emb] }\nrequest: { generation_paths: [/gen], embedding_paths: [/gen, /x] }\n');
    expect(file.problems).toEqual([
      expect.objectContaining({ level: 'warn', field: 'request.embedding_paths', message: '/x not in api.paths: the allowlist refuses them anyway' }),
      expect.objectContaining({ level: 'fail', field: 'request.embedding_paths', message: '/gen is also in request.generation_paths' }),
    ]);
  });

  it('api.error_formats: a path in two shapes fails; an unknown shape warns, naming the known ones', () => {
    expect(problemsOf('api: { paths: [/a], error_formats: { localrunner: ["/api/{rest...}"], cppengine: [/a] } }\n').file.problems).toEqual([]);
    expect(problemsOf('api: { paths: [/a], error_formats: { localrunner: [/a], msgapi: [/b, /a] } }\n').file.problems).toEqual([
      expect.objectContaining({ level: 'fail', field: 'api.error_formats.msgapi', message: '/a is also in api.error_formats.localrunner' }),
    ]);
    expect(problemsOf('api: { paths: [/a], error_formats: { ollama: [/a] } }\n').file.problems).toEqual([
      { level: 'warn', field: 'api.error_formats.ollama', message: 'unknown key "ollama" is ignored', fix: 'known keys here: msgapi, localrunner, cppengine' },
    ]);
  });

  it('features: checked for shape, and noted as informational when enabled', () => {
    expect(problemsOf('api: { paths: [/a] }\nfeatures: { metrics: { enabled: yes please } }\n').file.problems[0]).toMatchObject({
      level: 'fail',
      field: 'features.metrics.enabled',
    });
    expect(problemsOf('api: { paths: [/a] }\nfeatures: { metrics: { enabled: true, prefix: x_ } }\n').file.notes).toEqual([
      'features.metrics informational: the gateway does not act on it',
    ]);
  });

  it('characteristics: max_concurrent_requests comes with queue defaults', () => {
    expect(builtins.byName.get('deskrunner')!.characteristics).toMatchObject({ max_concurrent_requests: 1, max_queued_requests: 100, queue_timeout: '2m' });
    expect(builtins.byName.get('pagedengine')!.characteristics.max_concurrent_requests).toBeUndefined();
  });
});
