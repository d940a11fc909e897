// The one OpenAI-compatible base URL, /gw/openai/v1 (issue 21, first part): the official openai
// package lists every family's models there — one entry per id, the families serving it named —
// retrieves one by any name it is listed under, and reaches each model on whichever family serves
// it: chat completions (plain and streamed), completions, embeddings and the Responses API
// (openai-responses.test.ts); a route a family's engine lacks (here a Docker Model Runner profile
// without embeddings) is 404 ROUTE_NOT_SERVED, no backend contacted.
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { FakeBackend } from '../../../engine/demo/index.js';
import { closeAll, endpoint, startGateway, type Started } from '../../helpers/gateway.js';
import { waitFor } from '../../helpers/wait.js';
import { customProfiles } from '../../helpers/profiles.js';

let gw: Started;
let fakes: FakeBackend[];
let client: OpenAI;

beforeAll(async () => {
  fakes = await Promise.all([
    new FakeBackend({ family: 'localrunner', name: 'ollama', models: [{ name: 'llama3.2:3b' }, { name: 'shared-model' }] }).start(),
    new FakeBackend({
      family: 'cppengine',
      name: 'llama',
      models: [{ name: 'qwen3-8b', context: 32768 }, { name: 'shared-model' }, { name: 'both-model' }],
    }).start(),
    new FakeBackend({ family: 'pagedengine', name: 'vllm', models: [{ name: 'org/Mistral-7B', context: 16384 }, { name: 'bge-m3-embed' }] }).start(),
    new FakeBackend({ family: 'mlxsingle', name: 'mlx', models: [{ name: 'mlx-community/Qwen3-4B' }] }).start(),
    new FakeBackend({ family: 'containerrunner', name: 'dmr', models: [{ name: 'ai/smollm2' }, { name: 'both-model' }] }).start(),
  ]);
  // A Docker Model Runner whose profile has no embeddings route.
  const withoutEmbeddings = customProfiles({
    containerrunner: (p) => {
      p.api.paths = p.api.paths.filter((path: string) => !path.endsWith('/embeddings'));
      p.api.replay_safe_paths = p.api.replay_safe_paths.filter((path: string) => !path.endsWith('/embeddings'));
      p.request.embedding_paths = [];
    },
  });
  gw = await startGateway({
    proxy: { profiles_dir: withoutEmbeddings },
    model_aliases: { fast: ['qwen3-8b'] },
    discovery: { static: { endpoints: fakes.map((f) => endpoint(f.name, f.family, f.url)) } },
  });
  client = new OpenAI({ baseURL: `${gw.url}/gw/openai/v1`, apiKey: 'unused', maxRetries: 0 });
  await waitFor(async () => ((await client.models.list()).data.length >= 9 ? true : undefined), 'every family discovered');
});
afterAll(() => closeAll(gw, fakes));

describe('GET /gw/openai/v1/models', () => {
  it("lists every family's models, one entry per id, sorted, each naming the families that serve it", async () => {
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
      await waitFor(
        async () => ((await client.models.list()).data.every((m) => m.id !== 'org/Mistral-7B') ? true : undefined),
        "the down endpoint's models gone",
      );
      expect((await client.models.list()).data.map((m) => m.id)).toContain('qwen3-8b');
    } finally {
      vllm.behaviour.healthStatus = 200;
      const ep = gw.gw.runtime.endpoints.all.find((e) => e.name === 'vllm')!;
      await waitFor(() => ep.routable || undefined, 'vllm back');
    }
  });
});

describe('POST /gw/openai/v1/*: routed by model across every family', () => {
  /** The response, with the gateway's headers. */
  const chat = (model: string) => client.chat.completions.create({ model, messages: [{ role: 'user', content: 'hi' }] }).withResponse();

  it('chat completions reach the model on each family, each endpoint sent its own route', async () => {
    for (const [model, family, fake] of [
      ['llama3.2:3b', 'localrunner', 0],
      ['qwen3-8b', 'cppengine', 1],
      ['org/Mistral-7B', 'pagedengine', 2],
      ['mlx-community/Qwen3-4B', 'mlxsingle', 3],
    ] as const) {
      const { data, response } = await chat(model);
      expect(response.headers.get('x-gw-backend-type')).toBe(family);
      expect(data.choices[0].message.content).toBe(`Hello from ${fakes[fake].name}`);
      expect(fakes[fake].proxiedTo('/v1/chat/completions').at(-1)?.json.model).toBe(model);
    }
  });

  it("an engine that serves the route under another path is sent it there, query kept (Docker Model Runner's /engines/v1)", async () => {
    const { response } = await client.chat.completions
      .create({ model: 'ai/smollm2', messages: [{ role: 'user', content: 'hi' }] }, { query: { trace: '1' } })
      .withResponse();
    expect(response.headers.get('x-gw-endpoint')).toBe('dmr');
    const sent = fakes[4].traffic.at(-1)!;
    expect(sent.url).toBe('/engines/v1/chat/completions?trace=1');
  });

  it('counts its traffic on /internal/status', async () => {
    const before = ((await (await request(`${gw.url}/internal/status`)).body.json()) as any).statistics.requests_total;
    await chat('qwen3-8b');
    const after = ((await (await request(`${gw.url}/internal/status`)).body.json()) as any).statistics.requests_total;
    expect(after).toBe(before + 1);
  });

  it('a body that is not JSON or names no model is 400, no backend asked', async () => {
    const traffic = fakes.reduce((n, f) => n + f.traffic.length, 0);
    for (const body of ['not json', '{"messages":[]}']) {
      const res = await request(`${gw.url}/gw/openai/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
      expect(res.statusCode).toBe(400);
      await res.body.dump();
    }
    expect(fakes.reduce((n, f) => n + f.traffic.length, 0)).toBe(traffic);
  });

  it('an alias resolves to its real name on its family', async () => {
    const { response } = await chat('fast');
    expect(response.headers.get('x-gw-endpoint')).toBe('llama');
    expect(fakes[1].proxiedTo('/v1/chat/completions').at(-1)?.json.model).toBe('qwen3-8b');
  });

  it('streams', async () => {
    const stream = await client.chat.completions.create({ model: 'org/Mistral-7B', messages: [{ role: 'user', content: 'hi' }], stream: true });
    let text = '';
    for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? '';
    expect(text).toBe('Hello from vllm');
  });

  it('completions and embeddings route by model', async () => {
    const c = await client.completions.create({ model: 'qwen3-8b', prompt: 'Say' }).withResponse();
    expect(c.response.headers.get('x-gw-endpoint')).toBe('llama');
    const e = await client.embeddings.create({ model: 'bge-m3-embed', input: 'text' }).withResponse();
    expect(e.response.headers.get('x-gw-endpoint')).toBe('vllm');
    expect(e.data.data[0].embedding.length).toBeGreaterThan(0);
  });

  it("a route the family's engine lacks is 404 ROUTE_NOT_SERVED naming the model and family, no backend asked", async () => {
    const before = fakes[4].traffic.length;
    const err = await client.embeddings.create({ model: 'ai/smollm2', input: 'x' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.NotFoundError);
    const body = (err as InstanceType<typeof OpenAI.NotFoundError>).error as { code: string; message: string };
    expect(body.code).toBe('ROUTE_NOT_SERVED');
    expect((err as InstanceType<typeof OpenAI.NotFoundError>).headers.get('x-gw-routing-decision')).toBe('rejected');
    expect(body.message).toContain('ai/smollm2');
    expect(body.message).toContain('containerrunner');
    expect(fakes[4].traffic.length).toBe(before);
  });

  it("answers the SDKs' preflight as the other routes do", async () => {
    const res = await request(`${gw.url}/gw/openai/v1/chat/completions`, {
      method: 'OPTIONS',
      headers: {
        origin: 'http://app.example',
        'access-control-request-method': 'POST',
        'access-control-request-headers': 'content-type, authorization, x-stainless-os',
      },
    });
    await res.body.dump();
    expect(res.statusCode).toBe(204);
    expect(res.headers['access-control-allow-origin']).toBe('*');
    expect(String(res.headers['access-control-allow-headers'])).toContain('x-stainless-os');
  });

  it('an unknown model is 404 MODEL_NOT_FOUND', async () => {
    const err = await chat('no-such-model').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.NotFoundError);
    expect(((err as InstanceType<typeof OpenAI.NotFoundError>).error as { code: string }).code).toBe('MODEL_NOT_FOUND');
  });

  it('the last resort (every endpoint serving the model down) is one whose family serves the route', async () => {
    // both-model: on Docker Model Runner (no embeddings route here) and llama.cpp (has it), both down;
    // their health checks keep failing, while llama still answers inference (as a backend coming back does).
    const [llama, dmr] = [fakes[1], fakes[4]];
    const down = gw.gw.runtime.endpoints.all.filter((e) => e.name === 'llama' || e.name === 'dmr');
    llama.behaviour.healthStatus = 500;
    dmr.behaviour.healthStatus = 500;
    try {
      await waitFor(() => down.every((e) => !e.routable) || undefined, 'llama and dmr out of rotation');
      const r = await client.embeddings.create({ model: 'both-model', input: 'hi' }).withResponse();
      expect(r.response.headers.get('x-gw-endpoint')).toBe('llama');
      expect(r.response.headers.get('x-gw-routing-reason')).toBe('last_resort');
    } finally {
      llama.behaviour.healthStatus = 200;
      dmr.behaviour.healthStatus = 200;
      await waitFor(() => down.every((e) => e.routable) || undefined, 'back');
    }
  });
});
