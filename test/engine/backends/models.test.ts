// Model lists in, catalogue records out: parsing every family's list shape, glob patterns,
// deduplication, and the output formats.
import { describe, expect, it } from 'vitest';
import { Catalogue } from '../../../engine/backends/catalogue.js';
import { parseModelList } from '../../../engine/backends/model-lists.js';
import { contextFromShow } from '../../../engine/backends/model-info.js';
import { DEFAULT_CONTEXT, compileTraits, globToRegExp } from '../../../engine/backends/model-traits.js';
import { renderList } from '../../../plugins/catalogue/model-formats.js';
import type { Endpoint } from '../../../engine/backends/endpoints.js';
import { FakeBackend } from '../../../engine/demo/index.js';
import { modelList } from '../../../engine/demo/openai.js';
import { profiles } from '../../helpers/plugin.js';

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

// Each engine reports its context window in its own words; the catalogue reads it before the
// profile's patterns (and the platform default of 4096) apply.
describe('context windows as each engine reports them', () => {
  it('llama.cpp: the per-slot serving context of data[].meta (n_ctx: what a request can use), the trained n_ctx_train kept as detail, though an Ollama-style models array comes first', () => {
    // What llama-server answers on /v1/models (captured from the real server beside the suite).
    const real = {
      models: [
        {
          name: 'tiny-chat',
          model: 'tiny-chat',
          modified_at: '',
          size: '',
          digest: '',
          type: 'model',
          description: '',
          tags: [''],
          capabilities: ['completion'],
          parameters: '',
          details: { parent_model: '', format: 'gguf', family: '', families: [''], parameter_size: '', quantization_level: '' },
        },
      ],
      object: 'list',
      data: [
        {
          id: 'tiny-chat',
          aliases: ['tiny-chat'],
          tags: [],
          object: 'model',
          created: 1795480144,
          owned_by: 'llamacpp',
          meta: { vocab_type: true, n_vocab: 32000, n_ctx: 1024, n_ctx_train: 2048, n_embd: 64, n_params: 4178240, size: 16712960, ftype: 'all F32' },
        },
      ],
    };
    const [m] = parseModelList(real, 'common');
    // -c 2048 with 2 slots: each request has 1024 (what /props' default_generation_settings.n_ctx says too).
    expect(m).toMatchObject({ name: 'tiny-chat', context: 1024, size: 16712960, ownedBy: 'llamacpp' });
    expect(m.details).toMatchObject({ n_ctx: 1024, n_ctx_train: 2048, n_params: 4178240 });
    // An older server, whose meta has only the trained context: that.
    const older = { data: [{ id: 'old', object: 'model', owned_by: 'llamacpp', meta: { n_ctx_train: 4096 } }] };
    expect(parseModelList(older, 'common')[0]).toMatchObject({ name: 'old', context: 4096 });
    // The fake speaks the same shape.
    expect(parseModelList(modelList(fake('cppengine', [{ name: 'q', context: 32768, servingContext: 8192 } as any]), 'cppengine'), 'common')[0]).toMatchObject({
      name: 'q',
      context: 8192,
      details: { n_ctx: 8192, n_ctx_train: 32768 },
    });
  });
  it('vLLM, SGLang, mlx multi-model and lmdeploy: max_model_len', () => {
    for (const family of ['pagedengine', 'radixengine', 'mlxmulti'] as const) {
      expect(parseModelList(modelList(fake(family), family))[0]).toMatchObject({ name: 'a-7b', context: 9000 });
    }
    expect(parseModelList({ object: 'list', data: [{ id: 'internlm2', object: 'model', owned_by: 'lmdeploy', max_model_len: 32768 }] })[0].context).toBe(32768);
  });
  it('LM Studio: max_context_length (v1 and api/v0, loaded_context_length kept), and the legacy engines list', () => {
    expect(parseModelList(modelList(fake('deskrunner'), 'deskrunner'))[0].context).toBe(9000);
    const v0 = {
      object: 'list',
      data: [
        {
          id: 'qwen2.5-7b-instruct',
          object: 'model',
          type: 'llm',
          publisher: 'lmstudio-community',
          arch: 'qwen2',
          compatibility_type: 'gguf',
          quantization: 'Q4_K_M',
          state: 'loaded',
          max_context_length: 32768,
          loaded_context_length: 4096,
        },
      ],
    };
    expect(parseModelList(v0, 'deskrunner')[0]).toMatchObject({ context: 32768, loaded: true, details: { loaded_context_length: 4096 } });
    expect(parseModelList(modelList(fake('deskrunner'), 'deskrunner-legacy'), 'deskrunner')[0]).toMatchObject({ context: 9000, details: { tokenizer: 'bpe' } });
  });
  it('hosted services and multi-provider gateways: context_window or context_length when they give one', () => {
    expect(parseModelList(modelList(fake('hosted-compatible'), 'hosted'))[0].context).toBe(9000);
    expect(parseModelList(modelList(fake('multigateway'), 'multigateway'))[0].context).toBe(9000);
    expect(parseModelList(modelList(fake('hosted-compatible', [{ name: 'gpt-4o' } as any]), 'hosted'))[0].context).toBeUndefined();
  });
  it('Ollama: api/tags has none; api/show names it under model_info["<arch>.context_length"]', () => {
    expect(parseModelList(modelList(fake('localrunner'), 'localrunner'), 'localrunner')[0].context).toBeUndefined();
    expect(contextFromShow({ model_info: { 'general.architecture': 'qwen2', 'qwen2.context_length': 32768, 'qwen2.embedding_length': 3584 } })).toBe(32768);
    expect(contextFromShow({ model_info: { 'bert.context_length': 2048 } })).toBe(2048);
    expect(contextFromShow({ model_info: {} })).toBeUndefined();
    expect(contextFromShow({ error: 'model not found' })).toBeUndefined();
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
    cat.set(a, [
      { name: 'llama3:latest', digest: 'sha256:1', details: {} },
      { name: 'phi3', details: {} },
    ]);
    cat.set(b, [
      { name: 'llama3:8b', digest: 'sha256:1', details: {} },
      { name: 'phi3', details: {} },
    ]);
    cat.set(c, [{ name: 'phi3', details: {} }]);
    const local = cat.family('localrunner').models;
    expect(local.map((m) => [m.id, m.names, m.endpoints.map((e) => e.name)])).toEqual([
      ['llama3:latest', ['llama3:latest', 'llama3:8b'], ['a', 'b']],
      ['phi3', ['phi3'], ['a', 'b']],
    ]);
    expect(
      cat
        .all()
        .filter((m) => m.id === 'phi3')
        .map((m) => m.family),
    ).toEqual(['localrunner', 'pagedengine']);
    expect(cat.servedBy('localrunner', 'llama3:8b')).toEqual([b]);
    expect(cat.servedBy('localrunner', 'llama3')).toEqual([a]);
  });

  it('renders every list format', () => {
    const cat = new Catalogue(() => [a]);
    cat.set(
      a,
      parseModelList(
        modelList(
          fake('localrunner', [
            { name: 'llava:7b', digest: 'sha256:v', context: 4096 },
            { name: 'nomic-embed-text', digest: 'sha256:e', context: 2048 },
          ]),
          'localrunner',
        ),
      ),
    );
    const models = cat.all();
    const unified = renderList('unified', models) as any;
    expect(unified.total).toBe(2);
    expect(unified.providers).toEqual({ localrunner: 2 });
    expect(unified.models[0]).toMatchObject({
      id: 'llava:7b',
      provider: 'localrunner',
      endpoint: 'a',
      capabilities: ['chat', 'completion', 'vision'],
      vision: true,
      embedding: false,
      available: true,
      metadata: { family: 'llama', quantization: 'Q4_K_M', digest: 'sha256:v' },
    });
    expect(unified.models[1]).toMatchObject({ capabilities: ['embedding'], embedding: true });
    // The spec's unified record, and nothing of the other form.
    expect(Object.keys(unified.models[0])).toEqual([
      'id',
      'name',
      'provider',
      'endpoint',
      'capabilities',
      'context_window',
      'max_tokens',
      'vision',
      'embedding',
      'available',
      'metadata',
    ]);
    expect(unified.models[0].metadata.endpoints).toEqual(['a']);
    // The other form: endpoints, capabilities as booleans, context_length, created; envelope `models` only.
    const other = renderList('catalogue', models) as any;
    expect(Object.keys(other)).toEqual(['models']);
    expect(other.models[0]).toEqual({
      id: 'llava:7b',
      name: 'llava:7b',
      provider: 'localrunner',
      endpoints: ['a'],
      capabilities: { chat: true, completion: true, embeddings: false, vision: true },
      context_length: 4096,
      max_tokens: 4096,
      available: true,
      created: 1793527200,
      metadata: { size: 4_000_000_000, modified: '2026-11-01T10:00:00Z', family: 'llama', parameter_size: '8B', quantization: 'Q4_K_M', digest: 'sha256:v' },
    });
    expect(other.models[1].capabilities).toEqual({ chat: false, completion: false, embeddings: true, vision: false });
    expect((renderList('common', models) as any).data[0]).toEqual({ id: 'llava:7b', object: 'model', created: 1793527200, owned_by: 'localrunner' });
    expect((renderList('pagedengine', models) as any).data[0].max_model_len).toBe(4096);
    expect((renderList('localrunner', models) as any).models[0]).toMatchObject({
      name: 'llava:7b',
      model: 'llava:7b',
      digest: 'v',
      details: { family: 'llama' },
    });
    // The legacy desktop list: engines has chat_completions or completions, with the tokenizer.
    expect((renderList('deskrunner', models) as any).data[0].engines).toEqual({
      chat_completions: { context_length: 4096, max_tokens: 4096, tokenizer: null },
    });
    expect((renderList('deskrunner', models) as any).data[1]).toEqual({
      id: 'nomic-embed-text',
      object: 'model',
      owned_by: 'nomic',
      permission: [],
      engines: { completions: { context_length: 4096, max_tokens: 4096, tokenizer: null } },
    });
  });
});
