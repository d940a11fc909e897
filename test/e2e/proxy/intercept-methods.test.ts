// A model-list route the gateway answers belongs to the gateway for every method: GET and HEAD
// are answered from the catalogue, anything else is 405 and never reaches a backend (a DELETE of
// /v1/models/{id} on a hosted service deletes a fine-tuned model with the endpoint's key). A path
// the profile lists exactly is still the backend's, whatever the method.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { FakeBackend } from '../../../engine/demo/index.js';
import { closeAll, endpoint, startGateway, type Started } from '../../helpers/gateway.js';

let hosted: FakeBackend, local: FakeBackend, mlx: FakeBackend;
let gw: Started;
const fakes = () => [hosted, local, mlx];

beforeAll(async () => {
  hosted = await new FakeBackend({ family: 'hosted', name: 'hosted', models: [{ name: 'gpt-4o' }, { name: 'ft:gpt-4o:me' }] }).start();
  local = await new FakeBackend({ family: 'localrunner', name: 'local', models: [{ name: 'llama3:latest', loaded: true }] }).start();
  mlx = await new FakeBackend({ family: 'mlxmulti', name: 'mlx', models: [{ name: 'Qwen3-4B' }] }).start();
  gw = await startGateway({
    discovery: {
      static: {
        endpoints: [
          endpoint('hosted', 'hosted', hosted.url, { auth: { type: 'bearer', token: 'sk-endpoint-key' } }),
          endpoint('local', 'localrunner', local.url),
          endpoint('mlx', 'mlxmulti', mlx.url),
        ],
      },
    },
  });
});
afterAll(() => closeAll(gw, fakes()));
beforeEach(() => fakes().forEach((f) => (f.received.length = 0)));

const send = async (method: string, path: string) => {
  const res = await request(`${gw.url}${path}`, {
    method: method as 'GET',
    headers: { 'content-type': 'application/json' },
    body: method === 'GET' || method === 'HEAD' ? undefined : '{}',
  });
  const text = await res.body.text();
  return { status: res.statusCode, headers: res.headers, json: text ? JSON.parse(text) : undefined };
};

describe('methods other than GET and HEAD on an intercepted path', () => {
  it('DELETE of a hosted model id is refused with 405 and never reaches the backend', async () => {
    const r = await send('DELETE', '/gw/hosted-compatible/v1/models/ft:gpt-4o:me');
    expect(r.status).toBe(405);
    expect(r.headers.allow).toBe('GET, HEAD');
    expect(r.json.error).toMatchObject({ code: 'METHOD_NOT_ALLOWED', type: 'method_not_allowed' });
    expect(r.json.error.message).toContain('DELETE /v1/models/ft:gpt-4o:me');
    expect(hosted.traffic).toHaveLength(0);
  });

  it('every other method, on list and id paths of several families, is refused the same way', async () => {
    for (const [method, path] of [
      ['POST', '/gw/hosted/v1/models/gpt-4o'],
      ['PUT', '/gw/hosted/v1/models'],
      ['PATCH', '/gw/hosted/v1/models/org/model'],
      ['POST', '/gw/localrunner/api/tags'],
      ['DELETE', '/gw/localrunner/api/ps'],
      ['DELETE', '/gw/localrunner/v1/models/llama3:latest'],
      ['POST', '/gw/mlxmulti/v1/models'],
    ]) {
      const r = await send(method, path);
      expect([method, path, r.status, r.headers.allow]).toEqual([method, path, 405, 'GET, HEAD']);
    }
    expect(fakes().flatMap((f) => f.traffic)).toHaveLength(0);
  });

  it('GET and HEAD are still answered from the catalogue', async () => {
    expect((await send('GET', '/gw/hosted/v1/models/ft:gpt-4o:me')).json).toMatchObject({ id: 'ft:gpt-4o:me', object: 'model' });
    const head = await send('HEAD', '/gw/hosted/v1/models/gpt-4o');
    expect([head.status, head.json]).toEqual([200, undefined]);
    expect(hosted.traffic).toHaveLength(0);
  });

  it("a path the profile lists exactly stays the backend's for every method (mlxmulti v1/models/status)", async () => {
    const r = await send('POST', '/gw/mlxmulti/v1/models/status');
    expect(r.status).toBe(200);
    expect(mlx.traffic.map((q) => [q.method, q.url])).toEqual([['POST', '/v1/models/status']]);
  });
});
