// What a route needs, from the profile (items 5, 10 and 17 of issue 10): a request that names no
// model goes to an endpoint that can serve its route (llama.cpp's /completion never to an
// embeddings-only server, /embedding never to a chat server); model-management routes are routed
// by family, not by the model they name; the model is read from the profile's model_field_paths.
import { afterEach, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { FakeBackend, type FakeModel } from '../../../engine/demo/index.js';
import { closeAll, endpoint, startGateway, type Started } from '../../helpers/gateway.js';
import { customProfiles } from '../../helpers/profiles.js';
import { waitFor } from '../../helpers/wait.js';

let gw: Started | null = null;
let fakes: FakeBackend[] = [];
afterEach(async () => {
  await closeAll(gw, fakes);
  [gw, fakes] = [null, []];
});

/** One endpoint per model set, priority falling in list order; waits until each model list is in. */
async function family(family: string, sets: FakeModel[][], extra: Record<string, unknown> = {}) {
  fakes = await Promise.all(sets.map((models, i) => new FakeBackend({ family, name: `e${i}`, models }).start()));
  gw = await startGateway({
    ...extra,
    discovery: { static: { endpoints: fakes.map((f, i) => endpoint(f.name, family, f.url, { priority: 100 - i * 10 })) } },
  });
  const listed = sets.filter((s) => s.length > 0).length;
  await waitFor(async () => {
    const s = (await (await request(`${gw!.url}/internal/status/models?detailed=true`)).body.json()) as any;
    return new Set(s.models.flatMap((m: any) => m.endpoint_ids)).size === listed;
  }, 'every model list discovered');
}

async function post(path: string, body: unknown) {
  const res = await request(`${gw!.url}${path}`, { method: 'POST', body: JSON.stringify(body), headers: { 'content-type': 'application/json' } });
  const text = await res.body.text();
  const h = res.headers;
  return {
    status: res.statusCode,
    json: text ? JSON.parse(text) : undefined,
    endpoint: h['x-gw-endpoint'],
    routing: [h['x-gw-routing-decision'], h['x-gw-routing-reason']],
  };
}

const m = (...names: string[]) => names.map((name) => ({ name }));

describe('requests without a model go where the route can be served', () => {
  it('llama.cpp: /completion to the chat server, /embedding to the embeddings server, whatever their priority', async () => {
    // The embeddings-only server has the higher priority: by balancing alone it would get both.
    await family('cppengine', [m('tiny-embed'), m('tiny-chat')]);
    for (let i = 0; i < 3; i++) {
      expect(await post('/gw/cppengine/completion', { prompt: 'hi', n_predict: 4 })).toMatchObject({
        status: 200,
        endpoint: 'e1',
        routing: ['routed', 'capability_generation'],
      });
      expect(await post('/gw/cppengine/v1/chat/completions', { messages: [{ role: 'user', content: 'hi' }] })).toMatchObject({
        endpoint: 'e1',
        routing: ['routed', 'capability_generation'],
      });
      expect(await post('/gw/cppengine/embedding', { content: 'hi' })).toMatchObject({
        status: 200,
        endpoint: 'e0',
        routing: ['routed', 'capability_embedding'],
      });
    }
    expect(fakes[0].requestsTo('/completion')).toHaveLength(0);
    expect(fakes[1].requestsTo('/embedding')).toHaveLength(0);
  });

  it('balances among the capable endpoints only', async () => {
    await family('cppengine', [m('tiny-embed'), m('chat-a'), m('chat-b')], { proxy: { load_balancer: 'round-robin' } });
    const served = [];
    for (let i = 0; i < 4; i++) served.push((await post('/gw/cppengine/completion', { prompt: 'hi' })).endpoint);
    expect(served.sort()).toEqual(['e1', 'e1', 'e2', 'e2']);
  });

  it('falls back to endpoints whose model list is empty, then to every endpoint, and says so', async () => {
    await family('cppengine', [m('tiny-chat'), []]);
    // Nothing lists an embedding model: the endpoint that lists nothing may load one.
    expect(await post('/gw/cppengine/embedding', { content: 'hi' })).toMatchObject({ endpoint: 'e1', routing: ['fallback', 'capability_unknown'] });
    await closeAll(gw, fakes);
    await family('cppengine', [m('chat-a'), m('chat-b')]);
    // Nobody can: the backend answers (by balancing), rather than the gateway guessing.
    expect(await post('/gw/cppengine/embedding', { content: 'hi' })).toMatchObject({ endpoint: 'e0', routing: ['fallback', 'no_capable_endpoint'] });
  });

  it('leaves other routes and requests that name a model alone', async () => {
    await family('cppengine', [m('tiny-embed'), m('tiny-chat')]);
    expect(await post('/gw/cppengine/tokenize', { content: 'hi' })).toMatchObject({ endpoint: 'e0', routing: [undefined, undefined] });
    expect(await post('/gw/cppengine/v1/chat/completions', { model: 'tiny-chat', messages: [] })).toMatchObject({
      endpoint: 'e1',
      routing: ['routed', 'model_found'],
    });
  });
});

describe('model-management routes are routed by family, not by model', () => {
  it('forwards api/pull, api/create and api/delete for a model no endpoint lists yet (strict routing)', async () => {
    await family('localrunner', [m('phi3')]);
    for (const path of ['/api/pull', '/api/create', '/api/delete']) {
      const r = await post(`/gw/localrunner${path}`, { model: 'llama3.2:1b' });
      expect([path, r.status, r.routing]).toEqual([path, 200, ['routed', 'model_management']]);
    }
    expect(fakes[0].traffic.map((r) => r.url)).toEqual(['/api/pull', '/api/create', '/api/delete']);
    // Inference on that model is still strict.
    expect((await post('/gw/localrunner/api/chat', { model: 'llama3.2:1b', messages: [] })).status).toBe(404);
  });

  it('forwards npuengine api/v1/load for an unlisted model', async () => {
    await family('npuengine', [m('Qwen2.5-0.5B')]);
    const r = await post('/gw/npuengine/api/v1/load', { model: 'Llama-3.2-1B' });
    expect(r).toMatchObject({ status: 200, routing: ['routed', 'model_management'], json: { model: 'Llama-3.2-1B' } });
  });

  it('does not resolve or reject aliases on them', async () => {
    await family('localrunner', [m('phi3')], { model_aliases: { 'my-llama': ['llama3.2:1b'] } });
    expect((await post('/gw/localrunner/api/chat', { model: 'my-llama', messages: [] })).status).toBe(404);
    const r = await post('/gw/localrunner/api/pull', { model: 'my-llama' });
    expect(r.status).toBe(200);
    expect(fakes[0].traffic.at(-1)!.json).toEqual({ model: 'my-llama' });
  });

  it('keeps api/show model-routed: it reads a model, so it goes to the endpoint that has it', async () => {
    await family('localrunner', [m('phi3'), m('qwen2.5:7b')]);
    expect(await post('/gw/localrunner/api/show', { model: 'qwen2.5:7b' })).toMatchObject({ status: 200, endpoint: 'e1', routing: ['routed', 'model_found'] });
    expect((await post('/gw/localrunner/api/show', { model: 'nope' })).status).toBe(404);
  });
});

describe('request.model_field_paths', () => {
  it('reads the model from `name` too on localrunner (api/show as the spec writes it, older clients)', async () => {
    await family('localrunner', [m('phi3'), m('qwen2.5:7b')]);
    expect(await post('/gw/localrunner/api/show', { name: 'qwen2.5:7b' })).toMatchObject({ status: 200, endpoint: 'e1', routing: ['routed', 'model_found'] });
    // `model` wins when both are there.
    expect(await post('/gw/localrunner/api/show', { name: 'qwen2.5:7b', model: 'phi3' })).toMatchObject({ endpoint: 'e0' });
  });

  it('reads a custom field a profile names, and rewrites an alias there', async () => {
    const dir = customProfiles({ pagedengine: (p) => (p.request.model_field_paths = ['engine_model']) });
    await family('pagedengine', [m('a-model'), m('b-model')], { proxy: { profiles_dir: dir }, model_aliases: { fast: ['b-model'] } });
    expect(await post('/gw/pagedengine/v1/chat/completions', { engine_model: 'b-model', messages: [] })).toMatchObject({
      endpoint: 'e1',
      routing: ['routed', 'model_found'],
    });
    expect(await post('/gw/pagedengine/v1/chat/completions', { engine_model: 'fast', model: 'ignored', messages: [] })).toMatchObject({
      endpoint: 'e1',
      routing: ['routed', 'alias'],
    });
    expect(fakes[1].traffic.at(-1)!.json).toEqual({ engine_model: 'b-model', model: 'ignored', messages: [] });
  });
});
