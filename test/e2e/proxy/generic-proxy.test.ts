// /gw/proxy/*: any family, chosen by model; 503 when nothing is healthy.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { FakeBackend } from '../../../engine/demo/index.js';
import { endpoint, startGateway, type Started } from '../../helpers/gateway.js';

let local: FakeBackend, paged: FakeBackend, gw: Started;
beforeAll(async () => {
  local = await new FakeBackend({ family: 'localrunner', models: [{ name: 'phi3' }] }).start();
  paged = await new FakeBackend({ family: 'pagedengine', models: [{ name: 'Qwen2.5-7B' }] }).start();
  gw = await startGateway({ discovery: { static: { endpoints: [endpoint('local', 'localrunner', local.url), endpoint('paged', 'pagedengine', paged.url)] } } });
});
afterAll(async () => {
  await gw.close();
  await local.stop();
  await paged.stop();
});

describe('/gw/proxy/', () => {
  it('routes by model across families, prefix stripped', async () => {
    const res = await request(`${gw.url}/gw/proxy/v1/chat/completions?x=1`, { method: 'POST', body: JSON.stringify({ model: 'Qwen2.5-7B', messages: [] }) });
    await res.body.dump();
    expect(res.statusCode).toBe(200);
    expect(res.headers['x-gw-endpoint']).toBe('paged');
    expect(res.headers['x-gw-backend-type']).toBe('pagedengine');
    expect(paged.traffic[0].url).toBe('/v1/chat/completions?x=1');
  });

  it('names no family when a model is served by none (the message reads plainly)', async () => {
    const res = await request(`${gw.url}/gw/proxy/v1/chat/completions`, { method: 'POST', body: JSON.stringify({ model: 'gpt-9', messages: [] }) });
    const body = (await res.body.json()) as any;
    expect(res.statusCode).toBe(404);
    expect(body.error).toMatchObject({ code: 'MODEL_NOT_FOUND', message: 'model gpt-9 is not served by any endpoint; GET /gw/models lists what is served' });
  });

  it('answers 503 when no endpoint is healthy', async () => {
    const dead = await startGateway({ discovery: { static: { endpoints: [endpoint('d', 'localrunner', 'http://127.0.0.1:1')] } } });
    try {
      const res = await request(`${dead.url}/gw/proxy/v1/models`);
      const body = (await res.body.json()) as any;
      expect(res.statusCode).toBe(503);
      expect(body.error.type).toBe('endpoint_unavailable');
    } finally {
      await dead.close();
    }
  });
});
