// Context windows come from what each engine reports (llama.cpp's per-slot n_ctx, max_model_len,
// max_context_length, context_window / context_length, Ollama's api/show) before the profile's
// patterns and the platform default, and every list format shows them.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { FakeBackend } from '../../../engine/demo/index.js';
import { closeAll, endpoint, startGateway, type Started } from '../../helpers/gateway.js';

let fakes: FakeBackend[] = [];
let cpp: FakeBackend, local: FakeBackend, gw: Started;

beforeAll(async () => {
  cpp = await new FakeBackend({ family: 'cppengine', name: 'cpp', models: [{ name: 'tiny-chat', context: 2048, servingContext: 1024 }] }).start();
  // llama3.1 would be 131072 by the localrunner patterns; its api/show says 65536. phi3's show names no context.
  local = await new FakeBackend({
    family: 'localrunner',
    name: 'local',
    models: [
      { name: 'llama3.1:8b', digest: 'sha256:l31', context: 65536 },
      { name: 'phi3:mini', digest: 'sha256:phi' },
    ],
  }).start();
  fakes = [
    cpp,
    local,
    await new FakeBackend({ family: 'mlxmulti', name: 'mlx', models: [{ name: 'mlx-model', context: 16384 }] }).start(),
    await new FakeBackend({ family: 'deskrunner', name: 'desk', models: [{ name: 'desk-model', context: 12288 }] }).start(),
    await new FakeBackend({ family: 'hosted-compatible', name: 'hosted', models: [{ name: 'groq-model', context: 131072 }] }).start(),
    await new FakeBackend({ family: 'multigateway', name: 'multi', models: [{ name: 'anthropic/claude-x', context: 200000 }] }).start(),
    await new FakeBackend({ family: 'radixengine', name: 'radix', models: [{ name: 'radix-model', context: 40960 }] }).start(),
  ];
  gw = await startGateway({ discovery: { static: { endpoints: fakes.map((f) => endpoint(f.name, f.family, f.url)) } } });
});
afterAll(() => closeAll(gw, fakes));

const get = async (path: string) => (await (await request(`${gw.url}${path}`)).body.json()) as any;

describe('context windows', () => {
  it('come from each engine, in its own words', async () => {
    const { models } = await get('/gw/models');
    const context = Object.fromEntries(models.map((m: any) => [m.id, m.context_window]));
    expect(context).toEqual({
      'tiny-chat': 1024,
      'llama3.1:8b': 65536,
      'phi3:mini': 4096,
      'mlx-model': 16384,
      'desk-model': 12288,
      'groq-model': 131072,
      'anthropic/claude-x': 200000,
      'radix-model': 40960,
    });
    // llama.cpp: each of its slots serves 1024 of the 2048 context — what a request can use; the
    // trained context is kept beside it.
    expect(models.find((m: any) => m.id === 'tiny-chat').metadata).toMatchObject({ n_ctx: 1024, n_ctx_train: 2048 });
  });

  it('show in every list format', async () => {
    expect((await get('/gw/models?format=pagedengine&provider=cppengine')).data[0]).toMatchObject({ id: 'tiny-chat', max_model_len: 1024 });
    expect((await get('/gw/models?format=deskrunner&provider=cppengine')).data[0].engines).toEqual({
      chat_completions: { context_length: 1024, max_tokens: 1024, tokenizer: null },
    });
    expect((await get('/gw/models?format=catalogue&provider=cppengine')).models[0]).toMatchObject({ id: 'tiny-chat', context_length: 1024 });
    expect((await get('/gw/models/tiny-chat')).context_window).toBe(1024);
    const status = await get('/internal/status/models?detailed=true');
    expect(status.models.find((m: any) => m.id === 'tiny-chat')).toMatchObject({ context_window: 1024, endpoints: [{ context: 1024 }] });
  });

  it('asks Ollama api/show once per model (by digest), not every discovery cycle', async () => {
    const shows = () =>
      local
        .requestsTo('/api/show')
        .map((r) => r.json.model)
        .sort();
    expect(shows()).toEqual(['llama3.1:8b', 'phi3:mini']);
    for (let i = 0; i < 2; i++) await (await request(`${gw.url}/internal/models/refresh`, { method: 'POST' })).body.dump();
    expect(shows()).toEqual(['llama3.1:8b', 'phi3:mini']);
    // A new model is asked about at the next discovery, and only it.
    local.models = [...local.models, { name: 'qwen2.5:7b', digest: 'sha256:qw', context: 32768 }];
    await (await request(`${gw.url}/internal/models/refresh`, { method: 'POST' })).body.dump();
    expect(shows()).toEqual(['llama3.1:8b', 'phi3:mini', 'qwen2.5:7b']);
    expect((await get('/gw/models/qwen2.5:7b')).context_window).toBe(32768);
  });
});
