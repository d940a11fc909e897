// With no backend running, the 503 says what to start or configure: the endpoints with where they
// listen (never the URL's query or credentials) and their state, and what to edit — never the
// config file's path: a client of the gateway need not learn its file system.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { FakeBackend } from '../../../engine/demo/index.js';
import { closeAll, endpoint, startGateway, type Started } from '../../helpers/gateway.js';
import { freePort } from '../../helpers/llama-server.js';
import { waitFor } from '../../helpers/wait.js';

let sick: FakeBackend, gw: Started, nobody: string;

beforeAll(async () => {
  nobody = `http://127.0.0.1:${await freePort()}`;
  // Up, but failing its health checks: requests to it are held until a test lets them go.
  sick = await new FakeBackend({ family: 'pagedengine', name: 'sick', models: [{ name: 'paged-model' }] }).start();
  sick.behaviour.healthStatus = 500;
  gw = await startGateway({
    discovery: { static: { endpoints: [endpoint('llama', 'cppengine', `${nobody}/?token=s3cret`), endpoint('sick', 'pagedengine', sick.url)] } },
  });
});
afterAll(() => closeAll(gw, [sick]));

const chat = async (family: string) => {
  const res = await request(`${gw.url}/gw/${family}/v1/chat/completions`, {
    method: 'POST',
    body: JSON.stringify({ model: 'any', messages: [{ role: 'user', content: 'hi' }] }),
  });
  return { status: res.statusCode, retryAfter: res.headers['retry-after'], message: ((await res.body.json()) as any).error?.message as string };
};

describe('503 with nothing running', () => {
  it('names the URL nothing answered at and what to do, without its query', async () => {
    const r = await chat('cppengine');
    expect(r.status).toBe(503);
    expect(r.message).toContain(`nothing answered at ${nobody}: start the backend there, or correct the endpoint's url under discovery.static.endpoints`);
    expect(r.message).not.toContain('s3cret');
  });

  it('the model list with no endpoint healthy: each endpoint, where it listens and its state, and what to do', async () => {
    const res = await request(`${gw.url}/gw/models`);
    const message = ((await res.body.json()) as any).error.message as string;
    expect(res.statusCode).toBe(503);
    expect(message).toBe(
      `no healthy endpoints: the model catalogue is empty until one recovers (llama at ${nobody} (offline: ECONNREFUSED), sick at ${sick.url} (unhealthy: health check answered 500)); ` +
        `start the backend at ${nobody}, ${sick.url}, or correct their urls under discovery.static.endpoints in the config file`,
    );
  });

  it('while the one endpoint is being tried: the endpoints, their state, what to do, Retry-After', async () => {
    let release!: () => void;
    sick.behaviour.holdUntil = new Promise<void>((r) => (release = r));
    const tried = chat('pagedengine');
    await waitFor(() => sick.proxiedTo('/v1/chat/completions').length === 1, 'the last-resort request to reach the backend');
    const r = await chat('pagedengine');
    expect(r.status).toBe(503);
    expect(r.retryAfter).toBe('1');
    expect(r.message).toBe(
      `no healthy endpoint for provider pagedengine (1 configured, none routable: sick at ${sick.url} (unhealthy: health check answered 500)); ` +
        `start the backend at ${sick.url}, or correct its url under discovery.static.endpoints in the config file; a request is testing it now: retry in 1s`,
    );
    release();
    expect((await tried).status).toBe(200);
  });

  it('a family with no endpoint: where to add one', async () => {
    const r = await chat('radixengine');
    expect(r.status).toBe(503);
    expect(r.message).toBe(
      `no healthy endpoint for provider radixengine (no endpoint of this family is configured); add an endpoint (type: radixengine, url: where the backend listens) under discovery.static.endpoints in the config file`,
    );
    expect(r.message).not.toContain(gw.configFile);
  });
});
