// Aliases in every model list, read by the official clients: listed once per family that serves
// one of their targets, marked with the targets (alias_of), found by the detail routes, and left
// out where nothing serves them (no target listed, an embedding alias on the messages API, a
// family whose endpoints are down).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import Anthropic from '@anthropic-ai/sdk';
import { Ollama } from 'ollama';
import OpenAI from 'openai';
import { request } from 'undici';
import { FakeBackend } from '../../../engine/demo/index.js';
import { closeAll, endpoint, startGateway, type Started } from '../../helpers/gateway.js';
import { waitFor } from '../../helpers/wait.js';

let local: FakeBackend, paged: FakeBackend, gw: Started;

beforeAll(async () => {
  local = await new FakeBackend({
    family: 'localrunner',
    name: 'local',
    reply: 'Hi from the runner',
    models: [
      { name: 'llama3.1:8b', digest: 'sha256:aa' },
      { name: 'nomic-embed-text', digest: 'sha256:nn' },
    ],
  }).start();
  paged = await new FakeBackend({
    family: 'pagedengine',
    name: 'paged',
    reply: 'Hi from the engine',
    models: [{ name: 'Qwen/Qwen2.5-Coder-7B', context: 32768 }],
  }).start();
  gw = await startGateway({
    discovery: { static: { endpoints: [endpoint('local', 'localrunner', local.url), endpoint('paged', 'pagedengine', paged.url)] } },
    model_aliases: {
      'my-llama': ['llama3.1:8b'],
      coder: ['qwen-coder', 'Qwen/Qwen2.5-Coder-7B'],
      everywhere: { models: ['Qwen/Qwen2.5-Coder-7B', 'llama3.1:8b'], ordered: true },
      embedder: ['nomic-embed-text'],
      ghost: ['not-served-anywhere'],
      // Named like a model the family lists: that model is the one entry of the name there.
      'llama3.1:8b': ['llama3.1:8b', 'Qwen/Qwen2.5-Coder-7B'],
    },
  });
});
afterAll(() => closeAll(gw, [local, paged]));

const get = async (path: string) => {
  const res = await request(`${gw.url}${path}`);
  return { status: res.statusCode, json: (await res.body.json()) as any };
};
const ids = (items: { id: string }[]) => items.map((m) => m.id);

describe('/gw/models', () => {
  it('lists each alias once per family serving a target, after the models, as unified records marked alias_of', async () => {
    const { json } = await get('/gw/models');
    expect(json.models.map((m: any) => [m.id, m.provider])).toEqual([
      ['llama3.1:8b', 'localrunner'],
      ['nomic-embed-text', 'localrunner'],
      ['Qwen/Qwen2.5-Coder-7B', 'pagedengine'],
      ['my-llama', 'localrunner'],
      ['everywhere', 'localrunner'],
      ['embedder', 'localrunner'],
      ['coder', 'pagedengine'],
      ['everywhere', 'pagedengine'],
      ['llama3.1:8b', 'pagedengine'],
    ]);
    expect(json.total).toBe(9);
    expect(json.providers).toEqual({ localrunner: 5, pagedengine: 4 });
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
    const coder = json.models.find((m: any) => m.id === 'coder');
    expect(coder).toMatchObject({
      name: 'coder',
      endpoint: 'paged',
      context_window: 32768,
      available: true,
      metadata: { alias_of: ['Qwen/Qwen2.5-Coder-7B'], endpoints: ['paged'] },
    });
    expect(json.models.find((m: any) => m.id === 'embedder')).toMatchObject({ embedding: true, capabilities: ['embedding'] });
    expect(json.models.filter((m: any) => m.id === 'everywhere').map((m: any) => m.metadata.alias_of)).toEqual([['llama3.1:8b'], ['Qwen/Qwen2.5-Coder-7B']]);
    // Models carry no alias_of.
    expect(json.models[0].metadata.alias_of).toBeUndefined();
  });

  it('filters aliases by provider and capability like models, and marks them in every format', async () => {
    expect(ids((await get('/gw/models?provider=pagedengine')).json.models)).toEqual(['Qwen/Qwen2.5-Coder-7B', 'coder', 'everywhere', 'llama3.1:8b']);
    expect(ids((await get('/gw/models?capability=embedding')).json.models)).toEqual(['nomic-embed-text', 'embedder']);
    const common = (await get('/gw/models?format=common&provider=localrunner')).json.data;
    // Made and owned as its target.
    const target = common.find((d: any) => d.id === 'llama3.1:8b');
    expect(common.find((d: any) => d.id === 'my-llama')).toEqual({
      id: 'my-llama',
      object: 'model',
      created: target.created,
      owned_by: target.owned_by,
      alias_of: ['llama3.1:8b'],
    });
    const pagedCommon = (await get('/gw/models?format=common&provider=pagedengine')).json.data;
    expect(pagedCommon.find((d: any) => d.id === 'coder').owned_by).toBe(pagedCommon[0].owned_by);
    const native = (await get('/gw/models?format=localrunner&provider=localrunner')).json.models;
    expect(native.find((d: any) => d.name === 'my-llama')).toMatchObject({ model: 'my-llama', digest: 'aa', alias_of: ['llama3.1:8b'] });
    expect((await get('/gw/models?format=deskrunner&provider=pagedengine')).json.data.find((d: any) => d.id === 'coder')).toMatchObject({
      alias_of: ['Qwen/Qwen2.5-Coder-7B'],
      engines: { chat_completions: { context_length: 32768 } },
    });
    expect((await get('/gw/models?format=catalogue')).json.models.find((d: any) => d.id === 'coder')).toMatchObject({
      endpoints: ['paged'],
      metadata: { alias_of: ['Qwen/Qwen2.5-Coder-7B'] },
    });
  });

  it('/gw/models/{alias} answers the alias entry as listed; an alias nothing serves is not found', async () => {
    expect((await get('/gw/models/coder')).json).toMatchObject({ id: 'coder', provider: 'pagedengine', metadata: { alias_of: ['Qwen/Qwen2.5-Coder-7B'] } });
    expect(await get('/gw/models/ghost')).toMatchObject({ status: 404, json: { error: { code: 'MODEL_NOT_FOUND' } } });
  });
});

describe('family routes', () => {
  const openai = (prefix: string) => new OpenAI({ baseURL: `${gw.url}/gw/${prefix}/v1`, apiKey: 'sk-test', maxRetries: 0 });

  it('openai models.list() on a family sees the aliases that family serves, and retrieves one', async () => {
    expect(ids((await openai('localrunner').models.list()).data)).toEqual(['llama3.1:8b', 'nomic-embed-text', 'my-llama', 'everywhere', 'embedder']);
    const pagedList = (await openai('pagedengine').models.list()).data;
    expect(ids(pagedList)).toEqual(['Qwen/Qwen2.5-Coder-7B', 'coder', 'everywhere', 'llama3.1:8b']);
    // The family's own fields come from the target (max_model_len here).
    expect(pagedList[1]).toMatchObject({ id: 'coder', object: 'model', max_model_len: 32768, alias_of: ['Qwen/Qwen2.5-Coder-7B'] });
    expect(await openai('pagedengine').models.retrieve('everywhere')).toMatchObject({ id: 'everywhere', alias_of: ['Qwen/Qwen2.5-Coder-7B'] });
    await expect(openai('pagedengine').models.retrieve('my-llama')).rejects.toBeInstanceOf(OpenAI.NotFoundError);
    expect(local.received.concat(paged.received).filter((r) => r.url.includes('/models/'))).toHaveLength(0);
  });

  it('a listed alias can be used: chat through it', async () => {
    const res = await openai('pagedengine').chat.completions.create({ model: 'coder', messages: [{ role: 'user', content: 'hello' }] });
    expect(res.choices[0].message.content).toBe('Hi from the engine');
    expect(paged.traffic.at(-1)!.json.model).toBe('Qwen/Qwen2.5-Coder-7B');
  });

  it('ollama list() sees the aliases; show() finds one', async () => {
    const ollama = new Ollama({ host: `${gw.url}/gw/localrunner` });
    const { models } = await ollama.list();
    expect(models.map((m) => m.name)).toEqual(['llama3.1:8b', 'nomic-embed-text', 'my-llama', 'everywhere', 'embedder']);
    expect(models[2]).toMatchObject({ model: 'my-llama', digest: 'aa', alias_of: ['llama3.1:8b'] });
    const shown = await ollama.show({ model: 'my-llama' });
    expect(shown.model_info).toBeDefined();
    expect(local.traffic.at(-1)!).toMatchObject({ url: '/api/show', json: { model: 'llama3.1:8b' } });
  });
});

describe('messages API', () => {
  const anthropic = () => new Anthropic({ baseURL: `${gw.url}/gw/msgapi`, apiKey: 'sk-ant-test', maxRetries: 0 });

  it('anthropic models.list() sees the chat aliases once each; retrieve finds one', async () => {
    const list = [];
    for await (const m of anthropic().models.list()) list.push(m);
    expect(ids(list)).toEqual(['llama3.1:8b', 'Qwen/Qwen2.5-Coder-7B', 'my-llama', 'everywhere', 'coder']);
    expect(list[4]).toMatchObject({ display_name: 'coder', type: 'chat', alias_of: ['Qwen/Qwen2.5-Coder-7B'] });
    expect(await anthropic().models.retrieve('my-llama')).toMatchObject({ id: 'my-llama', alias_of: ['llama3.1:8b'] });
    await expect(anthropic().models.retrieve('embedder')).rejects.toBeInstanceOf(Anthropic.NotFoundError);
  });
});

describe('health', () => {
  it('an alias leaves the lists of a family whose endpoints are all down, and stays in the others', async () => {
    await paged.stop();
    const msgapi = async () => ids((await get('/gw/msgapi/v1/models')).json.data);
    await waitFor(async () => !(await msgapi()).includes('coder'), 'the aliases of the stopped engine to leave the messages API list');
    expect(await msgapi()).toEqual(['llama3.1:8b', 'my-llama', 'everywhere']);
    // The unified list keeps the family's models and aliases, unavailable.
    const { json } = await get('/gw/models?provider=pagedengine');
    expect(json.models.map((m: any) => [m.id, m.available])).toEqual([
      ['Qwen/Qwen2.5-Coder-7B', false],
      ['coder', false],
      ['everywhere', false],
      ['llama3.1:8b', false],
    ]);
  });
});
