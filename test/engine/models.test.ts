// Model lists in, catalogue records out: parsing every family's list shape, glob patterns,
// deduplication, and the output formats.
import { describe, expect, it } from 'vitest';
import { Catalogue } from '../../engine/backends/catalogue.js';
import { parseModelList } from '../../engine/backends/model-lists.js';
import { DEFAULT_CONTEXT, compileTraits, globToRegExp } from '../../engine/backends/model-traits.js';
import { renderList } from '../../plugins/lib/model-formats.js';
import type { Endpoint } from '../../engine/backends/endpoints.js';
import { FakeBackend } from '../../engine/demo/index.js';
import { modelList } from '../../engine/demo/openai.js';
import { profiles } from '../helpers/plugin.js';

const fake = (family: string, models = [{ name: 'a-7b', digest: 'sha256:abc', context: 9000 }]) => new FakeBackend({ family, models });

describe('parsing model lists', () => {
  it('reads the native runner list with digests and details', () => {
    const [m] = parseModelList(modelList(fake('localrunner'), 'localrunner'));
    expect(m).toMatchObject({ name: 'a-7b', digest: 'sha256:abc', size: 4_000_000_000, modified: '2026-11-01T10:00:00Z' });
    expect(m.details).toMatchObject({ family: 'llama', parameter_size: '8B', quantization_level: 'Q4_K_M' });
  });
  it('reads the data forms with their extras', () => {
    expect(parseModelList(modelList(fake('pagedengine'), 'pagedengine'))[0]).toMatchObject({ name: 'a-7b', context: 9000, ownedBy: 'pagedengine' });
    expect(parseModelList(modelList(fake('deskrunner'), 'deskrunner'))[0]).toMatchObject({ context: 9000 });
    expect(parseModelList(modelList(fake('npuengine'), 'npuengine'))[0].details).toMatchObject({ checkpoint: 'org/a-7b-onnx', recipe: 'oga-npu' });
  });
  it('reads the legacy desktop list (engines) and the multi-model status list', () => {
    expect(parseModelList(modelList(fake('deskrunner'), 'deskrunner-legacy'))[0]).toMatchObject({ name: 'a-7b', context: 9000, maxTokens: 4096 });
    expect(parseModelList(modelList(fake('mlxmulti'), 'mlxmulti-status'))[0]).toMatchObject({ name: 'a-7b', loaded: true, isLoading: false });
  });
  it('refuses a reply that is not a list', () => {
    expect(() => parseModelList({ nope: [] })).toThrow(/neither a "models" nor a "data" array/);
  });
});

describe('patterns', () => {
  it('are case-sensitive globs, first match wins, else the platform default', () => {
    expect(globToRegExp('*llama3.1*').test('meta-llama3.1:8b')).toBe(true);
    expect(globToRegExp('*llama3.1*').test('LLAMA3.1')).toBe(false);
    expect(globToRegExp('gpt-4?').test('gpt-4o')).toBe(true);
    const traits = compileTraits(profiles.byName.get('localrunner')!);
    expect(traits('llama3.1:8b').contextWindow).toBe(131072);
    expect(traits('llama3:8b').contextWindow).toBe(8192);
    expect(traits('phi3').contextWindow).toBe(DEFAULT_CONTEXT);
    expect(traits('nomic-embed-text')).toMatchObject({ embedding: true, vision: false });
    expect(traits('llava:13b')).toMatchObject({ vision: true });
    expect(traits('qwen2.5-coder:7b')).toMatchObject({ code: true, contextWindow: 32768 });
  });
});

describe('the catalogue', () => {
  const ep = (name: string, family: string) => ({ name, family, profile: profiles.byName.get(family)!, routable: true, id: name }) as unknown as Endpoint;
  const a = ep('a', 'localrunner');
  const b = ep('b', 'localrunner');
  const c = ep('c', 'pagedengine');

  it('deduplicates by digest within a family and never across families', () => {
    const cat = new Catalogue(() => [a, b, c]);
    cat.set(a, [{ name: 'llama3:latest', digest: 'sha256:1', details: {} }, { name: 'phi3', details: {} }]);
    cat.set(b, [{ name: 'llama3:8b', digest: 'sha256:1', details: {} }, { name: 'phi3', details: {} }]);
    cat.set(c, [{ name: 'phi3', details: {} }]);
    const local = cat.family('localrunner').models;
    expect(local.map((m) => [m.id, m.names, m.endpoints.map((e) => e.name)])).toEqual([
      ['llama3:latest', ['llama3:latest', 'llama3:8b'], ['a', 'b']],
      ['phi3', ['phi3'], ['a', 'b']],
    ]);
    expect(cat.all().filter((m) => m.id === 'phi3').map((m) => m.family)).toEqual(['localrunner', 'pagedengine']);
    expect(cat.servedBy('localrunner', 'llama3:8b')).toEqual([b]);
    expect(cat.servedBy('localrunner', 'llama3')).toEqual([a]);
  });

  it('renders every list format', () => {
    const cat = new Catalogue(() => [a]);
    cat.set(a, parseModelList(modelList(fake('localrunner', [{ name: 'llava:7b', digest: 'sha256:v', context: 4096 }, { name: 'nomic-embed-text', digest: 'sha256:e', context: 2048 }]), 'localrunner')));
    const models = cat.all();
    const unified = renderList('unified', models) as any;
    expect(unified.total).toBe(2);
    expect(unified.providers).toEqual({ localrunner: 2 });
    expect(unified.models[0]).toMatchObject({ id: 'llava:7b', provider: 'localrunner', endpoint: 'a', capabilities: ['chat', 'completion', 'vision'], vision: true, embedding: false, available: true, metadata: { family: 'llama', quantization: 'Q4_K_M', digest: 'sha256:v' } });
    expect(unified.models[1]).toMatchObject({ capabilities: ['embedding'], embedding: true });
    expect((renderList('common', models) as any).data[0]).toEqual({ id: 'llava:7b', object: 'model', created: 1793527200, owned_by: 'localrunner' });
    expect((renderList('pagedengine', models) as any).data[0].max_model_len).toBe(4096);
    expect((renderList('localrunner', models) as any).models[0]).toMatchObject({ name: 'llava:7b', model: 'llava:7b', digest: 'v', details: { family: 'llama' } });
    expect((renderList('deskrunner', models) as any).data[1]).toMatchObject({ id: 'nomic-embed-text', object: 'model', owned_by: 'nomic', engines: { embeddings: { context_length: 4096 } } });
  });
});
