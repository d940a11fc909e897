// The unified catalogue over real HTTP: several fakes per family with different model sets and
// shared digests, every /gw/models format and filter, intercepts, status views, refresh.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { FakeBackend } from '../../../engine/demo/index.js';
import { endpoint, startGateway, type Started } from '../../helpers/gateway.js';
import { waitFor } from '../../helpers/wait.js';

let local1: FakeBackend, local2: FakeBackend, paged: FakeBackend, npu: FakeBackend, gw: Started;

beforeAll(async () => {
  local1 = await new FakeBackend({
    family: 'localrunner',
    name: 'local1',
    models: [
      { name: 'llama3.1:8b', digest: 'sha256:aaa' },
      { name: 'nomic-embed-text', digest: 'sha256:emb' },
    ],
  }).start();
  // Same weights under another name (shared digest), plus a model only this one has.
  local2 = await new FakeBackend({
    family: 'localrunner',
    name: 'local2',
    models: [
      { name: 'llama3.1:latest', digest: 'sha256:aaa' },
      { name: 'llava:13b', digest: 'sha256:vis' },
    ],
  }).start();
  paged = await new FakeBackend({ family: 'pagedengine', name: 'paged', models: [{ name: 'llama3.1:8b', context: 65536 }] }).start();
  npu = await new FakeBackend({ family: 'npuengine', name: 'npu', models: [{ name: 'Phi-3.5-mini' }] }).start();
  gw = await startGateway({
    discovery: {
      static: {
        endpoints: [
          endpoint('local1', 'localrunner', local1.url, { check_interval: '100ms' }),
          endpoint('local2', 'localrunner', local2.url, { check_interval: '100ms' }),
          endpoint('paged', 'pagedengine', paged.url),
          endpoint('npu', 'npuengine', npu.url),
        ],
      },
    },
    model_aliases: { 'my-llama': ['llama3.1:8b', 'llama3.1:latest'] },
  });
});
afterAll(async () => {
  await gw.close();
  for (const f of [local1, local2, paged, npu]) await f.stop();
});
beforeEach(() => [local1, local2, paged, npu].forEach((f) => (f.received.length = 0)));

const get = async (path: string) => {
  const res = await request(`${gw.url}${path}`);
  return { status: res.statusCode, json: (await res.body.json()) as any };
};

describe('/gw/models', () => {
  it('lists the unified catalogue: deduplicated by digest within a family, never merged across families', async () => {
    const { status, json } = await get('/gw/models');
    expect(status).toBe(200);
    // Five models, and the alias my-llama in each family serving its target (alias-lists.test.ts).
    expect(json.total).toBe(7);
    expect(json.providers).toEqual({ localrunner: 4, pagedengine: 2, npuengine: 1 });
    const llamas = json.models.filter((m: any) => m.id.startsWith('llama3.1'));
    expect(llamas.map((m: any) => [m.provider, m.endpoint, m.metadata.endpoints])).toEqual([
      ['localrunner', 'local1', ['local1', 'local2']],
      ['pagedengine', 'paged', ['paged']],
    ]);
    // The spec's unified record: one endpoint, capabilities as a list; none of the other form's fields.
    for (const m of json.models)
      expect(Object.keys(m)).toEqual([
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
    expect(llamas[0]).toMatchObject({
      name: 'llama3.1:8b',
      endpoint: 'local1',
      context_window: 131072,
      capabilities: ['chat', 'completion'],
      metadata: { aliases: ['llama3.1:latest'] },
    });
    expect(llamas[1].context_window).toBe(65536);
  });

  it('filters by provider (a type alias works too) and capability', async () => {
    expect((await get('/gw/models?provider=pagedengine')).json.models.map((m: any) => m.id)).toEqual(['llama3.1:8b', 'my-llama']);
    expect((await get('/gw/models?capability=embedding')).json.models.map((m: any) => m.id)).toEqual(['nomic-embed-text']);
    expect((await get('/gw/models?capability=vision&provider=localrunner')).json.models.map((m: any) => m.id)).toEqual(['llava:13b']);
    expect((await get('/gw/models?provider=hosted')).json.total).toBe(0);
  });

  it('speaks every format', async () => {
    const common = (await get('/gw/models?format=common&provider=localrunner')).json;
    expect(common.object).toBe('list');
    expect(common.data.map((d: any) => d.id)).toEqual(['llama3.1:8b', 'nomic-embed-text', 'llava:13b', 'my-llama']);
    expect(Object.keys(common.data[0])).toEqual(['id', 'object', 'created', 'owned_by']);
    const native = (await get('/gw/models?format=localrunner&provider=localrunner')).json;
    expect(native.models[0]).toMatchObject({ name: 'llama3.1:8b', model: 'llama3.1:8b', digest: 'aaa', details: { format: 'gguf', family: 'llama' } });
    const desk = (await get('/gw/models?format=deskrunner')).json;
    expect(desk.data[0]).toMatchObject({
      id: 'llama3.1:8b',
      object: 'model',
      permission: [],
      engines: { chat_completions: { context_length: 131072, tokenizer: null } },
    });
    // The legacy desktop form knows chat_completions and completions engines only (an embedding model: completions).
    expect(desk.data.find((d: any) => d.id === 'nomic-embed-text').engines).toEqual({
      completions: { context_length: 4096, max_tokens: 4096, tokenizer: null },
    });
    // The spec's fields; an alias entry adds its targets.
    for (const d of desk.data)
      expect(Object.keys(d)).toEqual(['id', 'object', 'owned_by', 'permission', 'engines', ...(d.id === 'my-llama' ? ['alias_of'] : [])]);
    // The unified record's other documented form: every endpoint, capabilities as booleans, context_length, created.
    const other = (await get('/gw/models?format=catalogue&provider=localrunner')).json;
    expect(Object.keys(other)).toEqual(['models']);
    expect(other.models[0]).toMatchObject({
      id: 'llama3.1:8b',
      provider: 'localrunner',
      endpoints: ['local1', 'local2'],
      capabilities: { chat: true, completion: true, embeddings: false, vision: false },
      context_length: 131072,
      created: 1793527200,
    });
    expect(other.models[0].endpoint).toBeUndefined();
    const pagedList = (await get('/gw/models?format=pagedengine&provider=pagedengine')).json;
    expect(pagedList.data[0]).toMatchObject({ id: 'llama3.1:8b', max_model_len: 65536 });
  });

  it('refuses an unknown format, provider or capability with 400', async () => {
    expect(await get('/gw/models?format=xml')).toMatchObject({ status: 400, json: { error: { code: 'INVALID_FORMAT', type: 'bad_request' } } });
    expect(await get('/gw/models?provider=olama')).toMatchObject({ status: 400, json: { error: { code: 'INVALID_PROVIDER' } } });
    expect(await get('/gw/models?capability=telepathy')).toMatchObject({ status: 400, json: { error: { code: 'INVALID_CAPABILITY' } } });
  });

  it('finds one model by id, by another name, by alias; 404 otherwise', async () => {
    expect((await get('/gw/models/llava:13b')).json).toMatchObject({ id: 'llava:13b', vision: true });
    expect((await get('/gw/models/llama3.1:latest')).json).toMatchObject({ id: 'llama3.1:8b', provider: 'localrunner' });
    expect((await get('/gw/models/my-llama')).json).toMatchObject({
      id: 'my-llama',
      provider: 'localrunner',
      metadata: { alias_of: ['llama3.1:8b', 'llama3.1:latest'] },
    });
    expect(await get('/gw/models/gpt-9')).toMatchObject({ status: 404, json: { error: { code: 'MODEL_NOT_FOUND', type: 'not_found' } } });
  });
});

describe('native intercepts', () => {
  it.each(['/gw/npuengine/v1/models', '/gw/npuengine/api/v1/models'])('%s is answered from the catalogue without touching the backend', async (path) => {
    const { status, json } = await get(path);
    expect(status).toBe(200);
    expect(json.data).toEqual([
      { id: 'Phi-3.5-mini', object: 'model', created: 1732000000, owned_by: 'npuengine', checkpoint: 'org/Phi-3.5-mini-onnx', recipe: 'oga-npu' },
    ]);
    // Not proxied (health checks and discovery may reach it meanwhile: they carry no request id).
    expect(npu.traffic).toHaveLength(0);
  });
});

describe('status views', () => {
  it('/internal/status/models lists endpoint ids and no URLs', async () => {
    const { json } = await get('/internal/status/models');
    const ids = Object.fromEntries(gw.gw.runtime.endpoints.all.map((e) => [e.name, e.id]));
    expect(json.total).toBe(5);
    expect(json.models.find((m: any) => m.id === 'llama3.1:8b' && m.provider === 'localrunner').endpoint_ids).toEqual([ids.local1, ids.local2]);
    const detailed = await get('/internal/status/models?detailed=true');
    expect(detailed.json.models[0].endpoints[1]).toMatchObject({ id: ids.local2, name: 'local2', status: 'healthy', served_as: 'llama3.1:latest' });
    expect(JSON.stringify(detailed.json)).not.toContain('127.0.0.1');
  });

  it('/internal/stats/models counts requests per model and availability', async () => {
    await (await request(`${gw.url}/gw/localrunner/api/chat`, { method: 'POST', body: '{"model":"llava:13b","messages":[],"stream":false}' })).body.dump();
    const { json } = await get('/internal/stats/models');
    const llava = json.models.find((m: any) => m.model === 'llava:13b');
    expect(llava).toMatchObject({
      provider: 'localrunner',
      requests: 1,
      errors: 0,
      endpoints_total: 1,
      endpoints_routable: 1,
      availability: '100.00%',
      endpoints_by_status: { healthy: 1 },
    });
  });

  it('/internal/status counts discovered models per provider', async () => {
    const { json } = await get('/internal/status');
    expect(json.config.models_discovered).toBe(5);
    expect(json.models.by_provider.localrunner).toEqual(['llama3.1:8b', 'nomic-embed-text', 'llava:13b']);
    expect(json.endpoints.local2.models).toBe(2);
  });
});

describe('refresh', () => {
  it('marks the models of an endpoint that goes down unavailable, and rediscovers it when it recovers', async () => {
    await local2.stop();
    const gone = async () => (await get('/gw/models?provider=localrunner')).json.models.find((m: any) => m.id === 'llava:13b')?.available === false;
    await waitFor(gone, 'the models of the stopped endpoint to read unavailable');
    local2.models = [...local2.models, { name: 'qwen2.5:7b', digest: 'sha256:qw' }];
    await local2.start();
    const back = async () => (await get('/gw/models?provider=localrunner')).json.models.some((m: any) => m.id === 'qwen2.5:7b');
    await waitFor(back, 'the recovered endpoint to be rediscovered');
  });

  it('POST /internal/models/refresh rediscovers now, retrying a failing list', async () => {
    paged.models = [{ name: 'llama3.1:8b' }, { name: 'mistral-7b' }];
    paged.behaviour.listFailures = 2;
    const res = await request(`${gw.url}/internal/models/refresh`, { method: 'POST' });
    const json = (await res.body.json()) as any;
    expect(json.endpoints.find((e: any) => e.endpoint === 'paged')).toEqual({ endpoint: 'paged', ok: true, models: 2 });
    expect((await get('/gw/models?provider=pagedengine')).json.models.map((m: any) => m.id)).toEqual(['llama3.1:8b', 'mistral-7b', 'my-llama']);
  });
});
