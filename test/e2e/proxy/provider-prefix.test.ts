// Multi-provider gateways (models.provider_prefixed): "openai/gpt-4o-mini" reaches the gateway
// that lists "gpt-4o-mini", and "claude-3-haiku" the one that lists "anthropic/claude-3-haiku";
// the full name is matched first. Other families keep exact names.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import OpenAI from 'openai';
import { FakeBackend } from '../../../engine/demo/index.js';
import { closeAll, endpoint, startGateway, type Started } from '../../helpers/gateway.js';

let multi: FakeBackend, other: FakeBackend, paged: FakeBackend, gw: Started;

beforeAll(async () => {
  multi = await new FakeBackend({
    family: 'multigateway',
    name: 'litellm',
    reply: 'from litellm',
    models: [{ name: 'gpt-4o-mini' }, { name: 'anthropic/claude-3-haiku' }],
  }).start();
  // A second one lists the prefixed name itself: the full name wins over the stripped one.
  other = await new FakeBackend({ family: 'multigateway', name: 'litellm-2', reply: 'from litellm-2', models: [{ name: 'openai/gpt-4o-mini' }] }).start();
  paged = await new FakeBackend({ family: 'pagedengine', name: 'paged', models: [{ name: 'gpt-4o-mini' }] }).start();
  gw = await startGateway({
    discovery: {
      static: {
        endpoints: [
          endpoint('litellm', 'multigateway', multi.url),
          endpoint('litellm-2', 'multigateway', other.url),
          endpoint('paged', 'pagedengine', paged.url),
        ],
      },
    },
  });
});
afterAll(() => closeAll(gw, [multi, other, paged]));

const chat = async (prefix: string, model: string) => {
  const res = await request(`${gw.url}/gw/${prefix}/v1/chat/completions`, {
    method: 'POST',
    body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }] }),
  });
  return { status: res.statusCode, endpoint: res.headers['x-gw-endpoint'], json: (await res.body.json()) as any };
};

describe('provider-prefixed model names', () => {
  it('routes provider/model to the endpoint listing the bare name, unchanged in the body', async () => {
    const before = multi.traffic.length;
    const client = new OpenAI({ baseURL: `${gw.url}/gw/multigateway/v1`, apiKey: 'sk-test', maxRetries: 0 });
    const res = await client.chat.completions.create({ model: 'anthropic/claude-3-haiku', messages: [{ role: 'user', content: 'hi' }] });
    expect(res.choices[0].message.content).toBe('from litellm');
    expect(await chat('multigateway', 'claude-3-haiku')).toMatchObject({ status: 200, endpoint: 'litellm' });
    expect(multi.traffic.slice(before).map((r) => r.json.model)).toEqual(['anthropic/claude-3-haiku', 'claude-3-haiku']);
  });

  it('matches the full name first, then the part after the provider', async () => {
    // Listed in full by litellm-2 only.
    for (let i = 0; i < 3; i++) expect(await chat('multigateway', 'openai/gpt-4o-mini')).toMatchObject({ status: 200, endpoint: 'litellm-2' });
    // Bare: listed by litellm; not by litellm-2, whose listing carries a provider.
    for (let i = 0; i < 3; i++) expect(await chat('multigateway', 'gpt-4o-mini')).toMatchObject({ status: 200, endpoint: 'litellm' });
    expect(await chat('multigateway', 'azure/gpt-4o-mini')).toMatchObject({ status: 200, endpoint: 'litellm' });
    expect(await chat('multigateway', 'openai/gpt-5')).toMatchObject({ status: 404, json: { error: { code: 'MODEL_NOT_FOUND' } } });
  });

  it('answers v1/models/{id} by either spelling', async () => {
    const res = await request(`${gw.url}/gw/multigateway/v1/models/anthropic/claude-3-haiku`);
    expect(await res.body.json()).toMatchObject({ id: 'anthropic/claude-3-haiku', object: 'model' });
    const bare = await request(`${gw.url}/gw/multigateway/v1/models/claude-3-haiku`);
    expect(await bare.body.json()).toMatchObject({ id: 'anthropic/claude-3-haiku' });
  });

  it('is a profile flag: other families keep exact names', async () => {
    expect(await chat('pagedengine', 'openai/gpt-4o-mini')).toMatchObject({ status: 404, json: { error: { code: 'MODEL_NOT_FOUND' } } });
    expect(await chat('pagedengine', 'gpt-4o-mini')).toMatchObject({ status: 200, endpoint: 'paged' });
  });

  it('works across families on the messages API', async () => {
    const res = await request(`${gw.url}/gw/msgapi/v1/messages`, {
      method: 'POST',
      body: JSON.stringify({ model: 'claude-3-haiku', max_tokens: 16, messages: [{ role: 'user', content: 'hi' }] }),
    });
    expect(res.statusCode).toBe(200);
    expect(res.headers['x-gw-endpoint']).toBe('litellm');
    expect(((await res.body.json()) as any).content[0].text).toBe('from litellm');
  });
});
