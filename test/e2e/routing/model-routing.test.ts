// Model-aware routing: candidates are the endpoints serving the model; strict, optimistic and
// discovery strategies; aliases rewritten to each endpoint's real name.
import { afterEach, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { FakeBackend, type FakeModel } from '../../../engine/demo/index.js';
import { closeAll, endpoint, startGateway, type Started } from '../../helpers/gateway.js';

let gw: Started | null = null;
let fakes: FakeBackend[] = [];
afterEach(async () => {
  await closeAll(gw, fakes);
  [gw, fakes] = [null, []];
});

/** Fakes of one family with the given model sets, priority falling in list order. */
async function family(sets: FakeModel[][], extra: Record<string, unknown> = {}, family = 'localrunner') {
  fakes = await Promise.all(sets.map((models, i) => new FakeBackend({ family, name: `e${i}`, models }).start()));
  gw = await startGateway({
    ...extra,
    discovery: { static: { endpoints: fakes.map((f, i) => endpoint(f.name, family, f.url, { priority: 100 - i * 10, check_interval: '60s' })) } },
  });
}

async function chat(model: string, body?: string) {
  const res = await request(`${gw!.url}/gw/localrunner/v1/chat/completions`, {
    method: 'POST',
    body: body ?? JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }] }),
    headers: { 'content-type': 'application/json' },
  });
  const json = (await res.body.json()) as any;
  const h = res.headers;
  return {
    status: res.statusCode,
    json,
    endpoint: h['x-gw-endpoint'],
    model: h['x-gw-model'],
    routing: [h['x-gw-routing-strategy'], h['x-gw-routing-decision'], h['x-gw-routing-reason']],
  };
}

const m = (...names: string[]) => names.map((name) => ({ name }));

describe('model routing', () => {
  it('sends the request to the one endpoint that has the model, even at lower priority', async () => {
    await family([m('phi3'), m('phi3'), m('qwen2.5:7b')]);
    const r = await chat('qwen2.5:7b');
    expect(r).toMatchObject({ status: 200, endpoint: 'e2', routing: ['strict', 'routed', 'model_found'] });
    expect(fakes[2].traffic).toHaveLength(1);
    expect(fakes[0].traffic).toHaveLength(0);
  });

  it('balances among the endpoints that have it and fails over among them only', async () => {
    await family([m('phi3'), m('qwen2.5:7b'), m('qwen2.5:7b')]);
    await fakes[1].stop();
    const r = await chat('qwen2.5:7b');
    expect(r).toMatchObject({ status: 200, endpoint: 'e2' });
    expect(fakes[0].traffic).toHaveLength(0);
  });

  it('matches a tagless name to :latest', async () => {
    await family([m('llama3:latest')]);
    expect((await chat('llama3')).status).toBe(200);
  });
});

describe('strict (the default)', () => {
  it('rejects an unknown model with 404', async () => {
    await family([m('phi3')]);
    const r = await chat('gpt-9');
    expect(r).toMatchObject({
      status: 404,
      routing: ['strict', 'rejected', 'model_not_found'],
      json: { error: { code: 'MODEL_NOT_FOUND', type: 'not_found' } },
    });
    expect(fakes[0].traffic).toHaveLength(0);
  });

  it('rejects with 503 a model served only by endpoints that are not routable, each request trying one of them (the last resort)', async () => {
    await family([m('phi3'), m('qwen2.5:7b')]);
    await fakes[1].stop();
    // The first request finds the endpoint refusing; it is marked unhealthy, the request fails over nowhere.
    expect((await chat('qwen2.5:7b')).status).toBe(503);
    // The next tries it once more, in case it is back (MODEL_UNAVAILABLE while such a try is out:
    // last-resort-model.test.ts).
    const r = await chat('qwen2.5:7b');
    expect(r).toMatchObject({ status: 503, routing: ['strict', 'routed', 'last_resort'], json: { error: { code: 503, type: 'endpoint_unavailable' } } });
    expect(r.json.error.message).toContain(`nothing answered at ${fakes[1].url}`);
  });

  it('routes by family alone while the catalogue knows nothing (lazy-loading runners)', async () => {
    await family([[], []], {}, 'localrunner');
    const r = await chat('anything');
    expect(r).toMatchObject({ status: 200, endpoint: 'e0', routing: ['strict', 'routed', 'catalogue_empty'] });
  });
});

describe('optimistic', () => {
  const optimistic = (fallback: string) => ({ model_registry: { routing_strategy: { type: 'optimistic', options: { fallback_behavior: fallback } } } });

  it('compatible_only falls back to endpoints serving the same kind of model', async () => {
    await family([m('nomic-embed-text'), m('phi3')], optimistic('compatible_only'));
    const r = await chat('mistral:7b');
    expect(r).toMatchObject({ status: 200, endpoint: 'e1', routing: ['optimistic', 'fallback', 'fallback_compatible'] });
    const e = await chat('bge-m3-embed');
    expect(e).toMatchObject({ status: 200, endpoint: 'e0' });
  });

  it('all falls back to every routable endpoint', async () => {
    await family([m('nomic-embed-text'), m('phi3')], optimistic('all'));
    expect(await chat('mistral:7b')).toMatchObject({ status: 200, endpoint: 'e0', routing: ['optimistic', 'fallback', 'fallback_all'] });
  });

  it('none rejects as strict does', async () => {
    await family([m('phi3')], optimistic('none'));
    expect(await chat('mistral:7b')).toMatchObject({ status: 404, routing: ['optimistic', 'rejected', 'model_not_found'] });
  });
});

describe('discovery', () => {
  const discovery = { model_registry: { routing_strategy: { type: 'discovery', options: { discovery_timeout: '2s' } } } };

  it('refreshes the catalogue on a miss and routes to the endpoint that now has the model', async () => {
    await family([m('phi3'), m('phi3')], discovery);
    fakes[1].models = m('phi3', 'brand-new:1b');
    const r = await chat('brand-new:1b');
    expect(r).toMatchObject({ status: 200, endpoint: 'e1', routing: ['discovery', 'routed', 'discovered'] });
  });

  it('rejects when the refresh does not find it either', async () => {
    await family([m('phi3')], discovery);
    expect(await chat('never-heard-of-it')).toMatchObject({ status: 404, routing: ['discovery', 'rejected', 'model_not_found'] });
  });
});

describe('aliases', () => {
  const aliases = { model_aliases: { 'my-llama': ['llama3.1:8b', 'llama-3.1-8b-instruct', 'Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf'] } };

  it('rewrites the model to the name the chosen endpoint serves, keeping every other byte', async () => {
    await family([m('phi3'), m('llama-3.1-8b-instruct')], aliases);
    const body = '{"messages":[{"role":"user","content":"héllo \\"model\\": x"}],\n "model" : "my-llama", "temperature":0.2}';
    const r = await chat('my-llama', body);
    expect(r).toMatchObject({ status: 200, endpoint: 'e1', model: 'llama-3.1-8b-instruct', routing: ['strict', 'routed', 'alias'] });
    const seen = fakes[1].traffic[0];
    expect(seen.text).toBe(body.replace('"my-llama"', '"llama-3.1-8b-instruct"'));
    expect(Number(seen.headers['content-length'])).toBe(seen.body.length);
  });

  it('does not rewrite when the endpoint serves the alias name itself', async () => {
    await family([m('my-llama')], { model_aliases: { 'my-llama': ['my-llama'] } });
    const body = JSON.stringify({ model: 'my-llama', messages: [] });
    await chat('my-llama', body);
    expect(fakes[0].traffic[0].text).toBe(body);
  });

  it('wins over a real model of the same name', async () => {
    await family([m('phi3'), m('llama3.1:8b')], { model_aliases: { phi3: ['llama3.1:8b'] } });
    const r = await chat('phi3');
    expect(r).toMatchObject({ endpoint: 'e1', model: 'llama3.1:8b' });
    expect(fakes[1].traffic[0].json.model).toBe('llama3.1:8b');
  });

  it('sends each failover attempt the name of the endpoint it goes to', async () => {
    await family([m('llama3.1:8b'), m('Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf')], aliases);
    await fakes[0].stop();
    const r = await chat('my-llama');
    expect(r).toMatchObject({ status: 200, endpoint: 'e1', model: 'Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf' });
    expect(fakes[1].traffic[0].json.model).toBe('Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf');
  });

  it('in strict mode rejects an alias whose targets are served nowhere', async () => {
    await family([m('phi3')], aliases);
    expect(await chat('my-llama')).toMatchObject({ status: 404, routing: ['strict', 'rejected', 'alias_not_found'] });
  });

  it('otherwise routes an alias with no served target as an ordinary name', async () => {
    await family([m('phi3'), m('my-llama')], { ...aliases, model_registry: { routing_strategy: { type: 'optimistic' } } });
    const r = await chat('my-llama');
    expect(r).toMatchObject({ status: 200, endpoint: 'e1', routing: ['optimistic', 'routed', 'model_found'] });
    expect(fakes[1].traffic[0].json.model).toBe('my-llama');
  });

  it('leaves a non-JSON body untouched', async () => {
    await family([m('phi3')], aliases);
    const res = await request(`${gw!.url}/gw/localrunner/api/show`, { method: 'POST', body: 'model=my-llama', headers: { 'content-type': 'text/plain' } });
    await res.body.dump();
    expect(fakes[0].traffic[0].text).toBe('model=my-llama');
  });
});

describe('discovery settings', () => {
  it('GW_DISCOVERY_MODEL_DISCOVERY_ENABLED=false turns discovery off: nothing is fetched, routing by family', async () => {
    fakes = [await new FakeBackend({ family: 'localrunner', models: m('phi3') }).start()];
    gw = await startGateway(
      { discovery: { static: { endpoints: [endpoint('e0', 'localrunner', fakes[0].url)] } } },
      { GW_DISCOVERY_MODEL_DISCOVERY_ENABLED: 'false', GW_DISCOVERY_MODEL_DISCOVERY_INTERVAL: '90s' },
    );
    expect(fakes[0].requestsTo('/api/tags')).toHaveLength(0);
    expect(gw.gw.runtime.discovery.intervalMs).toBe(90_000);
    expect(await chat('whatever')).toMatchObject({ status: 200, routing: ['strict', 'routed', 'catalogue_empty'] });
  });

  it('/gw/models answers 503 NO_ENDPOINTS when no endpoint is healthy', async () => {
    gw = await startGateway({ discovery: { static: { endpoints: [endpoint('dead', 'localrunner', 'http://127.0.0.1:1')] } } });
    const res = await request(`${gw.url}/gw/models`);
    expect(res.statusCode).toBe(503);
    expect(((await res.body.json()) as any).error).toMatchObject({ code: 'NO_ENDPOINTS', type: 'service_unavailable' });
  });
});
