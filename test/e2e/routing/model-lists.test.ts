// A family's model-list routes answered from its merged catalogue, in the family's own format:
// with two endpoints of one family the lists no longer depend on which endpoint a request would
// have reached; api/ps is merged from every routable endpoint; /v1/models/{id} and
// /gw/msgapi/v1/models/{id} answer one model; an offline endpoint's models are not listed.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { request } from 'undici';
import Anthropic from '@anthropic-ai/sdk';
import { FakeBackend } from '../../../engine/demo/index.js';
import { closeAll, endpoint, startGateway, type Started } from '../../helpers/gateway.js';
import { waitFor } from '../../helpers/wait.js';

let local1: FakeBackend,
  local2: FakeBackend,
  desk1: FakeBackend,
  desk2: FakeBackend,
  paged1: FakeBackend,
  paged2: FakeBackend,
  mlx: FakeBackend,
  npu1: FakeBackend,
  npu2: FakeBackend;
let gw: Started;
const fakes = () => [local1, local2, desk1, desk2, paged1, paged2, mlx, npu1, npu2];

beforeAll(async () => {
  local1 = await new FakeBackend({
    family: 'localrunner',
    name: 'local1',
    models: [
      { name: 'llama3.1:8b', digest: 'sha256:aaa', loaded: true },
      { name: 'nomic-embed-text', digest: 'sha256:emb' },
    ],
  }).start();
  // The same weights under two tags (one shared with local1), and a model only it has.
  local2 = await new FakeBackend({
    family: 'localrunner',
    name: 'local2',
    models: [
      { name: 'qwen2.5:7b', digest: 'sha256:qw', loaded: true },
      { name: 'llama3.1:latest', digest: 'sha256:aaa' },
      { name: 'llama3.1:8b', digest: 'sha256:aaa', loaded: true },
    ],
  }).start();
  desk1 = await new FakeBackend({ family: 'deskrunner', name: 'desk1', models: [{ name: 'qwen2.5-7b-instruct', context: 32768 }] }).start();
  desk2 = await new FakeBackend({ family: 'deskrunner', name: 'desk2', models: [{ name: 'phi-3-mini', context: 4096 }] }).start();
  paged1 = await new FakeBackend({ family: 'pagedengine', name: 'paged1', models: [{ name: 'Qwen/Qwen2.5-7B-Instruct', context: 32768 }] }).start();
  paged2 = await new FakeBackend({ family: 'pagedengine', name: 'paged2', models: [{ name: 'meta-llama/Llama-3.1-8B', context: 131072 }] }).start();
  mlx = await new FakeBackend({ family: 'mlxmulti', name: 'mlx', models: [{ name: 'Qwen3-4B' }] }).start();
  npu1 = await new FakeBackend({ family: 'npuengine', name: 'npu1', models: [{ name: 'Phi-3.5-mini' }] }).start();
  npu2 = await new FakeBackend({ family: 'npuengine', name: 'npu2', models: [{ name: 'Llama-3.2-1B' }] }).start();
  gw = await startGateway({
    discovery: {
      static: {
        endpoints: [
          endpoint('local1', 'localrunner', local1.url),
          endpoint('local2', 'localrunner', local2.url),
          endpoint('desk1', 'deskrunner', desk1.url),
          endpoint('desk2', 'deskrunner', desk2.url),
          endpoint('paged1', 'pagedengine', paged1.url),
          endpoint('paged2', 'pagedengine', paged2.url),
          endpoint('mlx', 'mlxmulti', mlx.url),
          endpoint('npu1', 'npuengine', npu1.url),
          endpoint('npu2', 'npuengine', npu2.url),
        ],
      },
    },
  });
});
afterAll(() => closeAll(gw, fakes()));
beforeEach(() => fakes().forEach((f) => (f.received.length = 0)));

const get = async (path: string) => {
  const res = await request(`${gw.url}${path}`);
  return { status: res.statusCode, json: (await res.body.json()) as any };
};
/** Proxied requests that reached a backend (discovery and health checks carry no request id). */
const proxied = () => fakes().flatMap((f) => f.traffic);

describe('the same list from every call, whichever endpoint would have answered', () => {
  it('localrunner api/tags lists every tag of both endpoints, in the native format, on every call', async () => {
    for (let i = 0; i < 4; i++) {
      const { status, json } = await get('/gw/localrunner/api/tags');
      expect(status).toBe(200);
      expect(json.models.map((m: any) => m.name)).toEqual(['llama3.1:8b', 'llama3.1:latest', 'nomic-embed-text', 'qwen2.5:7b']);
    }
    const { json } = await get('/gw/localrunner/api/tags');
    expect(json.models[3]).toMatchObject({
      name: 'qwen2.5:7b',
      model: 'qwen2.5:7b',
      digest: 'qw',
      size: 4_000_000_000,
      details: { format: 'gguf', family: 'llama', quantization_level: 'Q4_K_M' },
    });
    expect(proxied()).toHaveLength(0);
  });

  it('localrunner v1/models is the common list of both endpoints', async () => {
    for (let i = 0; i < 3; i++) {
      const { json } = await get('/gw/localrunner/v1/models');
      expect(json.object).toBe('list');
      expect(json.data.map((m: any) => m.id)).toEqual(['llama3.1:8b', 'nomic-embed-text', 'qwen2.5:7b']);
    }
  });

  it('deskrunner v1/models and api/v1/models carry max_context_length; api/v0/models is the legacy list with engines', async () => {
    for (const path of ['/gw/deskrunner/v1/models', '/gw/desk-runner/api/v1/models']) {
      const { json } = await get(path);
      expect(json.data.map((m: any) => [m.id, m.object, m.max_context_length])).toEqual([
        ['qwen2.5-7b-instruct', 'model', 32768],
        ['phi-3-mini', 'model', 4096],
      ]);
    }
    const legacy = (await get('/gw/deskrunner/api/v0/models')).json;
    expect(legacy.models[1]).toMatchObject({ id: 'phi-3-mini', object: 'model', permission: [], engines: { chat_completions: { context_length: 4096 } } });
    expect(proxied()).toHaveLength(0);
  });

  it('pagedengine v1/models carries max_model_len', async () => {
    const { json } = await get('/gw/pagedengine/v1/models');
    expect(json.data.map((m: any) => [m.id, m.owned_by, m.max_model_len])).toEqual([
      ['Qwen/Qwen2.5-7B-Instruct', 'pagedengine', 32768],
      ['meta-llama/Llama-3.1-8B', 'pagedengine', 131072],
    ]);
  });

  it('api/ps asks every endpoint and answers their loaded models once each', async () => {
    const { status, json } = await get('/gw/localrunner/api/ps');
    expect(status).toBe(200);
    expect(json.models.map((m: any) => m.name)).toEqual(['llama3.1:8b', 'qwen2.5:7b']);
    expect(json.models[1]).toMatchObject({ model: 'qwen2.5:7b', digest: 'qw', size_vram: 4_000_000_000, expires_at: expect.any(String) });
    expect(local1.proxiedTo('/api/ps')).toHaveLength(1);
    expect(local2.proxiedTo('/api/ps')).toHaveLength(1);
  });
});

describe('one model: GET v1/models/{id}', () => {
  it('answers from the catalogue, an id with a slash written plainly, by any name it is served under', async () => {
    expect((await get('/gw/pagedengine/v1/models/Qwen/Qwen2.5-7B-Instruct')).json).toEqual({
      id: 'Qwen/Qwen2.5-7B-Instruct',
      object: 'model',
      created: 1732000000,
      owned_by: 'pagedengine',
      max_model_len: 32768,
    });
    expect((await get('/gw/localrunner/v1/models/llama3.1:latest')).json).toMatchObject({ id: 'llama3.1:latest', object: 'model' });
    expect((await get('/gw/deskrunner/v1/models/phi-3-mini')).json).toMatchObject({ id: 'phi-3-mini', max_context_length: 4096 });
    expect((await get('/gw/deskrunner/api/v0/models/phi-3-mini')).json).toMatchObject({
      id: 'phi-3-mini',
      engines: { chat_completions: { context_length: 4096 } },
    });
    expect(proxied()).toHaveLength(0);
  });

  it('answers 404 MODEL_NOT_FOUND in the gateway envelope for a model no endpoint of the family serves', async () => {
    const { status, json } = await get('/gw/pagedengine/v1/models/gpt-9');
    expect(status).toBe(404);
    expect(json.error).toMatchObject({ code: 'MODEL_NOT_FOUND', type: 'not_found' });
    expect(json.error.message).toContain('/gw/pagedengine/v1/models lists what is served');
    expect((await get('/gw/localrunner/v1/models/Qwen/Qwen2.5-7B-Instruct')).status).toBe(404); // another family's model
  });

  it('leaves a path the profile lists exactly to the backend (mlxmulti v1/models/status)', async () => {
    const { status, json } = await get('/gw/mlxmulti/v1/models/status');
    expect(status).toBe(200);
    expect(json).toMatchObject({ model_count: 1, models: [{ id: 'Qwen3-4B', loaded: true }] });
    expect(mlx.traffic.map((r) => r.url)).toEqual(['/v1/models/status']);
  });
});

describe('the messages API: GET /gw/msgapi/v1/models/{id}', () => {
  const client = () => new Anthropic({ baseURL: `${gw.url}/gw/msgapi`, apiKey: 'unused', maxRetries: 0 });

  it('retrieves a chat model as the list shows it, through the official SDK', async () => {
    const model = await client().models.retrieve('qwen2.5:7b');
    expect(model).toMatchObject({ id: 'qwen2.5:7b', display_name: 'qwen2.5:7b', created_at: '2026-11-01T10:00:00.000Z', type: 'chat' });
    const listed = (await get('/gw/msgapi/v1/models')).json.data.find((m: any) => m.id === 'qwen2.5:7b');
    expect(model).toEqual(listed);
    expect((await get('/gw/msgapi/v1/models/Qwen/Qwen2.5-7B-Instruct')).json.id).toBe('Qwen/Qwen2.5-7B-Instruct');
  });

  it('answers 404 in the messages API error shape for an unknown or embedding-only model', async () => {
    for (const id of ['no-such-model', 'nomic-embed-text']) {
      const { status, json } = await get(`/gw/msgapi/v1/models/${id}`);
      expect(status).toBe(404);
      expect(json).toMatchObject({ type: 'error', error: { type: 'not_found_error', code: 'MODEL_NOT_FOUND' } });
    }
    await expect(client().models.retrieve('no-such-model')).rejects.toBeInstanceOf(Anthropic.NotFoundError);
  });
});

describe('an offline endpoint', () => {
  it('drops out of every list while the catalogue keeps its models as unavailable', async () => {
    await local2.stop();
    await npu2.stop();
    const down = (name: string) => () => gw.gw.runtime.endpoints.all.find((e) => e.name === name)!.routable === false;
    await waitFor(down('local2'), 'local2 to be unroutable');
    await waitFor(down('npu2'), 'npu2 to be unroutable');

    expect((await get('/gw/localrunner/api/tags')).json.models.map((m: any) => m.name)).toEqual(['llama3.1:8b', 'nomic-embed-text']);
    expect((await get('/gw/localrunner/v1/models')).json.data.map((m: any) => m.id)).toEqual(['llama3.1:8b', 'nomic-embed-text']);
    expect((await get('/gw/localrunner/v1/models/qwen2.5:7b')).status).toBe(404);
    expect((await get('/gw/localrunner/api/ps')).json.models.map((m: any) => m.name)).toEqual(['llama3.1:8b']);
    expect((await get('/gw/npuengine/v1/models')).json.data.map((m: any) => m.id)).toEqual(['Phi-3.5-mini']);
    expect((await get('/gw/npuengine/api/v1/models')).json.data.map((m: any) => m.id)).toEqual(['Phi-3.5-mini']);
    expect((await get('/gw/msgapi/v1/models/qwen2.5:7b')).status).toBe(404);

    const catalogue = (await get('/gw/models?provider=localrunner')).json.models;
    expect(catalogue.find((m: any) => m.id === 'qwen2.5:7b')).toMatchObject({ available: false });
  });

  it('every endpoint of the family down: its model lists answer the 503 its other routes answer, naming each endpoint, where it listens, and the fix', async () => {
    await local1.stop();
    await waitFor(() => gw.gw.runtime.endpoints.all.find((e) => e.name === 'local1')!.routable === false || undefined, 'local1 to be unroutable');
    for (const path of ['/gw/localrunner/api/tags', '/gw/localrunner/v1/models']) {
      const { status, json } = await get(path);
      expect(status).toBe(503);
      // Ollama's shape on api/tags ({error: text}), the envelope on v1/models.
      const message = String(typeof json.error === 'string' ? json.error : json.error.message);
      expect(message).toMatch(/^no healthy endpoint for provider localrunner \(2 configured, none routable: local1 at http:\/\/127\.0\.0\.1:\d+ \(/);
      expect(message).toContain(`start the backend at ${local1.url}`);
    }
  });
});
