// The one OpenAI-compatible base URL, /gw/openai/v1 (issue 21, first part): the official openai
// package lists every family's models there — one entry per id, the families serving it named —
// and retrieves one by any name it is listed under.
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { FakeBackend } from '../../engine/demo/index.js';
import { closeAll, endpoint, startGateway, type Started } from '../helpers/gateway.js';
import { waitFor } from '../helpers/wait.js';

let gw: Started;
let fakes: FakeBackend[];
let client: OpenAI;

beforeAll(async () => {
  fakes = await Promise.all([
    new FakeBackend({ family: 'localrunner', name: 'ollama', models: [{ name: 'llama3.2:3b' }, { name: 'shared-model' }] }).start(),
    new FakeBackend({ family: 'cppengine', name: 'llama', models: [{ name: 'qwen3-8b', context: 32768 }, { name: 'shared-model' }] }).start(),
    new FakeBackend({ family: 'pagedengine', name: 'vllm', models: [{ name: 'org/Mistral-7B', context: 16384 }, { name: 'bge-m3-embed' }] }).start(),
  ]);
  gw = await startGateway({
    model_aliases: { fast: ['qwen3-8b'] },
    discovery: { static: { endpoints: fakes.map((f) => endpoint(f.name, f.family, f.url)) } },
  });
  client = new OpenAI({ baseURL: `${gw.url}/gw/openai/v1`, apiKey: 'unused', maxRetries: 0 });
  await waitFor(async () => ((await client.models.list()).data.length >= 6 ? true : undefined), 'every family discovered');
});
afterAll(() => closeAll(gw, fakes));

describe('GET /gw/openai/v1/models', () => {
  it('lists every family\'s models, one entry per id, sorted, each naming the families that serve it', async () => {
    const page = await client.models.list();
    const ids = page.data.map((m) => m.id);
    expect(ids).toEqual([...ids].sort());
    expect(ids).toEqual(expect.arrayContaining(['llama3.2:3b', 'qwen3-8b', 'org/Mistral-7B', 'bge-m3-embed', 'shared-model', 'fast']));
    expect(new Set(ids).size).toBe(ids.length);
    const byId = new Map(page.data.map((m) => [m.id, m as unknown as Record<string, unknown>]));
    expect(byId.get('shared-model')).toMatchObject({ object: 'model', families: expect.arrayContaining(['localrunner', 'cppengine']) });
    expect((byId.get('shared-model')!.families as string[]).length).toBe(2);
    expect(byId.get('org/Mistral-7B')).toMatchObject({ families: ['pagedengine'], context_length: 16384, owned_by: expect.any(String) });
    expect(byId.get('fast')).toMatchObject({ alias_of: ['qwen3-8b'], families: ['cppengine'] });
  });

  it('retrieves one model by id (a slash written plainly or encoded), 404 in the OpenAI shape for none', async () => {
    expect(await client.models.retrieve('qwen3-8b')).toMatchObject({ id: 'qwen3-8b', families: ['cppengine'], context_length: 32768 });
    expect(await client.models.retrieve('org/Mistral-7B')).toMatchObject({ id: 'org/Mistral-7B' });
    const plain = await request(`${gw.url}/gw/openai/v1/models/org/Mistral-7B`);
    expect(((await plain.body.json()) as { id: string }).id).toBe('org/Mistral-7B');
    const err = await client.models.retrieve('no-such-model').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.NotFoundError);
    expect((err as InstanceType<typeof OpenAI.NotFoundError>).message).toContain('no-such-model');
  });

  it('leaves out the models of an endpoint that is down', async () => {
    const vllm = fakes[2];
    vllm.behaviour.healthStatus = 500;
    try {
      await waitFor(async () => ((await client.models.list()).data.every((m) => m.id !== 'org/Mistral-7B') ? true : undefined), 'the down endpoint\'s models gone');
      expect((await client.models.list()).data.map((m) => m.id)).toContain('qwen3-8b');
    } finally {
      vllm.behaviour.healthStatus = 200;
    }
  });
});
