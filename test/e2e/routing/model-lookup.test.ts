// One lookup rule for a requested model name, the same on every route that looks one up:
// routing, GET /gw/models/{id}, GET /gw/<family>/v1/models/{id} and GET /gw/msgapi/v1/models/{id}.
// A name without a tag is ":latest" where the family's engine reads it so (localrunner:
// models.default_tag), and nowhere else; provider-prefixed names (multigateway) are found with
// and without their provider.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { FakeBackend } from '../../../engine/demo/index.js';
import { closeAll, endpoint, startGateway, type Started } from '../../helpers/gateway.js';
import { waitFor } from '../../helpers/wait.js';

let local: FakeBackend, paged: FakeBackend, multi: FakeBackend;
let gw: Started;

beforeAll(async () => {
  local = await new FakeBackend({
    family: 'localrunner',
    name: 'local',
    models: [
      { name: 'llama3:latest', digest: 'sha256:l3' },
      { name: 'qwen2.5:7b', digest: 'sha256:qw' },
    ],
  }).start();
  // Not an Ollama: "tagged:latest" is just a name there, and "tagged" is another one.
  paged = await new FakeBackend({ family: 'pagedengine', name: 'paged', models: [{ name: 'tagged:latest' }] }).start();
  multi = await new FakeBackend({ family: 'multigateway', name: 'multi', models: [{ name: 'openai/gpt-4o-mini' }] }).start();
  gw = await startGateway({
    discovery: {
      static: {
        endpoints: [endpoint('local', 'localrunner', local.url), endpoint('paged', 'pagedengine', paged.url), endpoint('multi', 'multigateway', multi.url)],
      },
    },
  });
  await waitFor(() => gw.gw.runtime.catalogue.all().length === 4, 'every endpoint discovered');
});
afterAll(() => closeAll(gw, [local, paged, multi]));

const get = async (path: string) => {
  const res = await request(`${gw.url}${path}`);
  return { status: res.statusCode, json: (await res.body.json()) as any };
};
const post = async (path: string, body: unknown) => {
  const res = await request(`${gw.url}${path}`, { method: 'POST', body: JSON.stringify(body), headers: { 'content-type': 'application/json' } });
  await res.body.dump();
  return res.statusCode;
};

/** What each lookup route answers for a name: [status, the id it shows]. */
async function everywhere(family: string, prefix: string, model: string) {
  const id = encodeURIComponent(model);
  const catalogue = await get(`/gw/models/${id}`);
  const familyItem = await get(`/gw/${prefix}/v1/models/${id}`);
  const msgapi = await get(`/gw/msgapi/v1/models/${id}`);
  const routed = await post(`/gw/${prefix}/v1/chat/completions`, { model, messages: [{ role: 'user', content: 'hi' }] });
  return {
    catalogue: [catalogue.status, catalogue.json.id ?? catalogue.json.error.code, catalogue.json.provider ?? family],
    family: [familyItem.status, familyItem.json.id ?? familyItem.json.error.code],
    msgapi: [msgapi.status, msgapi.json.id ?? msgapi.json.error.code],
    routed,
  };
}

describe('the lookup rule, route by route', () => {
  it('llama3 finds llama3:latest on every route of the family whose engine reads it so', async () => {
    expect(await everywhere('localrunner', 'localrunner', 'llama3')).toEqual({
      catalogue: [200, 'llama3:latest', 'localrunner'],
      family: [200, 'llama3:latest'],
      msgapi: [200, 'llama3:latest'],
      routed: 200,
    });
  });

  it('a full name is found as listed everywhere', async () => {
    expect(await everywhere('localrunner', 'localrunner', 'qwen2.5:7b')).toEqual({
      catalogue: [200, 'qwen2.5:7b', 'localrunner'],
      family: [200, 'qwen2.5:7b'],
      msgapi: [200, 'qwen2.5:7b'],
      routed: 200,
    });
  });

  it('a family without a default tag matches names as listed, on every route', async () => {
    expect(await everywhere('pagedengine', 'pagedengine', 'tagged')).toEqual({
      catalogue: [404, 'MODEL_NOT_FOUND', 'pagedengine'],
      family: [404, 'MODEL_NOT_FOUND'],
      msgapi: [404, 'MODEL_NOT_FOUND'],
      routed: 404,
    });
    expect((await everywhere('pagedengine', 'pagedengine', 'tagged:latest')).family).toEqual([200, 'tagged:latest']);
  });

  it('a provider-prefixed name is found with and without its provider, on every route', async () => {
    for (const model of ['openai/gpt-4o-mini', 'gpt-4o-mini']) {
      expect(await everywhere('multigateway', 'multigateway', model)).toEqual({
        catalogue: [200, 'openai/gpt-4o-mini', 'multigateway'],
        family: [200, 'openai/gpt-4o-mini'],
        msgapi: [200, 'openai/gpt-4o-mini'],
        routed: 200,
      });
    }
  });

  it('an unknown name is 404 on every route', async () => {
    expect(await everywhere('localrunner', 'localrunner', 'mistral')).toEqual({
      catalogue: [404, 'MODEL_NOT_FOUND', 'localrunner'],
      family: [404, 'MODEL_NOT_FOUND'],
      msgapi: [404, 'MODEL_NOT_FOUND'],
      routed: 404,
    });
  });
});
