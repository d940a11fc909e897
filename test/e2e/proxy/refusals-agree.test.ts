// One rule per refusal, whichever route answers it (issue 32, item 5): a model list or lookup over
// every family answers as /gw/models does while no endpoint is routable (503 NO_ENDPOINTS naming
// what to start), never an empty 200 that reads as "no models"; a route over every family names
// the model it could not serve, never a "provider openai" that no family is; a family's own routes
// name the family. The `code` is a string naming the condition, except the two the spec fixes as
// the number 503.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { ERROR_CODES } from '../../../engine/core/errors.js';
import { FakeBackend } from '../../../engine/demo/index.js';
import { closeAll, endpoint, startGateway, type Started } from '../../helpers/gateway.js';
import { freePort } from '../../helpers/llama-server.js';
import { waitFor } from '../../helpers/wait.js';

let gw: Started, nobody: string, empty: FakeBackend;

beforeAll(async () => {
  nobody = `http://127.0.0.1:${await freePort()}`;
  empty = await new FakeBackend({ family: 'pagedengine', name: 'empty', models: [] }).start();
  gw = await startGateway({ discovery: { static: { endpoints: [endpoint('llama', 'cppengine', nobody), endpoint('empty', 'pagedengine', empty.url)] } } });
});
afterAll(() => closeAll(gw, [empty]));

const get = async (path: string) => {
  const res = await request(`${gw.url}${path}`);
  return { status: res.statusCode, json: (await res.body.json()) as any };
};
const routable = (name: string) => gw.gw.runtime.endpoints.all.find((e) => e.name === name)!.routable;

describe('every endpoint down', () => {
  beforeAll(async () => {
    await empty.stop();
    await waitFor(() => !routable('empty') && !routable('llama'), 'both endpoints to be unroutable');
  });

  it.each([
    '/gw/models',
    '/gw/openai/v1/models',
    '/gw/msgapi/v1/models',
    '/gw/models/some-model',
    '/gw/openai/v1/models/some-model',
    '/gw/msgapi/v1/models/some-model',
  ])('%s answers 503 NO_ENDPOINTS naming each endpoint, where it listens, and what to start', async (path) => {
    const { status, json } = await get(path);
    expect(status).toBe(503);
    expect(json.error).toMatchObject({ code: 'NO_ENDPOINTS' });
    expect(json.error.message).toContain(`llama at ${nobody} (offline`);
    expect(json.error.message).toContain(`start the backend at ${nobody}, ${empty.url}`);
  });

  it('the route over every family names the model it could not serve, not a provider', async () => {
    const res = await request(`${gw.url}/gw/openai/v1/chat/completions`, {
      method: 'POST',
      body: JSON.stringify({ model: 'some-model', messages: [{ role: 'user', content: 'hi' }] }),
    });
    const { error } = (await res.body.json()) as any;
    expect(res.statusCode).toBe(503);
    expect(error.type).toBe('endpoint_unavailable');
    expect(error.message).toMatch(/^no healthy endpoint for model some-model \(/);
    expect(error.message).not.toContain('provider');
  });

  it("a family's route names the family (the spec's provider)", async () => {
    const res = await request(`${gw.url}/gw/vllm/v1/chat/completions`, {
      method: 'POST',
      body: JSON.stringify({ model: 'some-model', messages: [{ role: 'user', content: 'hi' }] }),
    });
    expect(res.statusCode).toBe(503);
    expect(((await res.body.json()) as any).error.message).toMatch(/^no healthy endpoint for provider pagedengine \(/);
  });
});

describe('an endpoint up that serves no model', () => {
  it('lists nothing with 200: the truth is "no models", and the lists agree', async () => {
    await empty.start();
    await waitFor(() => routable('empty') || undefined, 'the empty endpoint to be routable');
    expect(await get('/gw/openai/v1/models')).toEqual({ status: 200, json: { object: 'list', data: [] } });
    expect(await get('/gw/models')).toMatchObject({ status: 200, json: { models: [] } });
    expect((await get('/gw/openai/v1/models/some-model')).status).toBe(404);
  });
});

describe('the code', () => {
  it('is a string naming the condition, except the two the spec fixes as the number 503', () => {
    const numeric = Object.entries(ERROR_CODES)
      .filter(([, spec]) => typeof (spec as { code?: unknown }).code === 'number')
      .map(([key, spec]) => [key, (spec as { code: number }).code]);
    expect(numeric).toEqual([
      ['ENDPOINT_UNAVAILABLE', 503],
      ['CIRCUIT_BREAKER', 503],
    ]);
  });
});
