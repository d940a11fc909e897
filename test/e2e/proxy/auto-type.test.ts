// type auto: a generic OpenAI-compatible backend (health /, models /v1/models) under /gw/auto/,
// reachable by the messages API too. A type no family names (a typo) is refused at start, with the
// one family it most likely meant.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import OpenAI from 'openai';
import { FakeBackend } from '../../../engine/demo/index.js';
import { closeAll, endpoint, startGateway, type Started } from '../../helpers/gateway.js';

let generic: FakeBackend, typo: FakeBackend, gw: Started;

beforeAll(async () => {
  generic = await new FakeBackend({ family: 'auto', name: 'generic', reply: 'generic says hi', models: [{ name: 'my-model' }] }).start();
  typo = await new FakeBackend({ family: 'auto', name: 'typo', reply: 'typo says hi', models: [{ name: 'other-model' }] }).start();
  gw = await startGateway({ discovery: { static: { endpoints: [endpoint('generic', 'auto', generic.url), endpoint('typo', 'auto', typo.url)] } } });
});
afterAll(() => closeAll(gw, [generic, typo]));

describe('type auto', () => {
  it('a type no family names does not start: the one family it most likely meant is named', async () => {
    await expect(startGateway({ discovery: { static: { endpoints: [endpoint('typo', 'pagedengin', typo.url)] } } })).rejects.toMatchObject({
      field: 'discovery.static.endpoints[0].type',
      problem: 'unknown backend family "pagedengin" for endpoint "typo"',
      fix: 'did you mean "pagedengine" (vLLM)? write type: pagedengine',
    });
    expect(gw.gw.runtime.endpoints.all.map((e) => [e.name, e.family])).toEqual([
      ['generic', 'auto'],
      ['typo', 'auto'],
    ]);
  });

  it('checks health at / and discovers models at /v1/models', () => {
    for (const fake of [generic, typo]) {
      expect(fake.requestsTo('/').length).toBeGreaterThan(0);
      expect(fake.requestsTo('/v1/models').length).toBeGreaterThan(0);
    }
  });

  it('serves the OpenAI-compatible routes under /gw/auto/, routed by model', async () => {
    const client = new OpenAI({ baseURL: `${gw.url}/gw/auto/v1`, apiKey: 'sk-test', maxRetries: 0 });
    const a = await client.chat.completions.create({ model: 'my-model', messages: [{ role: 'user', content: 'hi' }] });
    const b = await client.chat.completions.create({ model: 'other-model', messages: [{ role: 'user', content: 'hi' }] });
    expect([a.choices[0].message.content, b.choices[0].message.content]).toEqual(['generic says hi', 'typo says hi']);
    expect((await client.models.list()).data.map((m) => m.id)).toEqual(['my-model', 'other-model']);
    const refused = await request(`${gw.url}/gw/auto/admin`);
    expect(refused.statusCode).toBe(404);
    await refused.body.dump();
  });

  it('is reached by the messages API in translation mode', async () => {
    const res = await request(`${gw.url}/gw/msgapi/v1/messages`, {
      method: 'POST',
      body: JSON.stringify({ model: 'other-model', max_tokens: 16, messages: [{ role: 'user', content: 'hi' }] }),
    });
    expect(res.statusCode).toBe(200);
    expect(res.headers['x-gw-mode']).toBeUndefined();
    expect(((await res.body.json()) as any).content[0].text).toBe('typo says hi');
    expect(typo.traffic.at(-1)!.url).toBe('/v1/chat/completions');
  });
});
