// type auto checks health at / (the spec's default), where the generic servers it is meant for
// answer differently: llama-server without its web UI and vLLM 404, TGI 405, Ollama 200. Any
// answer below 500 means a server is listening (profile health.passing: below_500); a 5xx does
// not, 401/403 still mean wrong credentials. Built-in families keep 2xx.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { FakeBackend } from '../../../engine/demo/index.js';
import { closeAll, endpoint, startGateway, type Started } from '../../helpers/gateway.js';

const fakes: Record<string, FakeBackend> = {};
let gw: Started;

beforeAll(async () => {
  const statuses = { 'not-found': 404, 'no-method': 405, broken: 500, locked: 401 };
  for (const [name, status] of Object.entries(statuses)) {
    fakes[name] = await new FakeBackend({ family: 'auto', name, reply: `${name} says hi`, models: [{ name: `${name}-model` }] }).start();
    fakes[name].behaviour.healthStatus = status;
  }
  // The same 404 from a family whose health route must answer 2xx.
  fakes.cpp = await new FakeBackend({ family: 'cppengine', name: 'cpp', models: [{ name: 'cpp-model' }] }).start();
  fakes.cpp.behaviour.healthStatus = 404;
  gw = await startGateway({
    discovery: { static: { endpoints: [...Object.keys(statuses).map((n) => endpoint(n, 'auto', fakes[n].url)), endpoint('cpp', 'cppengine', fakes.cpp.url)] } },
  });
});
afterAll(() => closeAll(gw, Object.values(fakes)));

const state = (name: string) => gw.gw.runtime.endpoints.all.find((e) => e.name === name)!;

describe('type auto health', () => {
  it('a 404 or 405 at / is a server that is there: Healthy, and it serves', async () => {
    expect(fakes['not-found'].requestsTo('/').length).toBeGreaterThan(0);
    expect([state('not-found').state, state('no-method').state]).toEqual(['healthy', 'healthy']);
    const res = await request(`${gw.url}/gw/auto/v1/chat/completions`, {
      method: 'POST',
      body: JSON.stringify({ model: 'not-found-model', messages: [{ role: 'user', content: 'hi' }] }),
    });
    expect(res.statusCode).toBe(200);
    expect(((await res.body.json()) as any).choices[0].message.content).toBe('not-found says hi');
  });

  it('a 5xx is not; 401 names the credentials; other families still need a 2xx', () => {
    expect(state('broken')).toMatchObject({ state: 'unhealthy', lastError: 'health check answered 500' });
    expect(state('locked').state).toBe('unhealthy');
    expect(state('locked').lastError).toMatch(/rejected with 401: check the endpoint's auth block/);
    expect(state('cpp')).toMatchObject({ state: 'unhealthy', lastError: 'health check answered 404' });
  });
});
