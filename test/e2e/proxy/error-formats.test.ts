// Gateway-made errors answer in the shape of the route's API (profile api.error_formats):
// localrunner's native api/* routes {"error": "<text>"}, cppengine's native routes
// {"error": {"code", "message", "type"}}, the messages API on a family route its own; the
// envelope everywhere else. Status and headers (Retry-After, X-Gw-*, CORS) are the same in every shape.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FakeBackend } from '../../../engine/demo/index.js';
import { closeAll, endpoint, startGateway, type Started } from '../../helpers/gateway.js';
import { rawRequest } from '../../helpers/http.js';
import { waitFor } from '../../helpers/wait.js';

let local: FakeBackend, desk: FakeBackend, gw: Started;

beforeAll(async () => {
  local = await new FakeBackend({ family: 'localrunner', name: 'local', models: [{ name: 'llama3.1:8b', digest: 'sha256:aa' }] }).start();
  desk = await new FakeBackend({ family: 'deskrunner', name: 'desk' }).start();
  // No cppengine endpoint: every request of that family finds none (503).
  gw = await startGateway({ discovery: { static: { endpoints: [endpoint('local', 'localrunner', local.url), endpoint('desk', 'deskrunner', desk.url)] } } });
  await waitFor(() => gw.gw.backends.endpoints.all.every((e) => e.state === 'healthy'), 'the endpoints to be healthy');
});
afterAll(() => closeAll(gw, [local, desk]));

const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
  rawRequest(`${gw.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
const chat = (model: string) => ({ model, messages: [{ role: 'user', content: 'hi' }], stream: false });

describe('localrunner native routes: {"error": "<text>"}', () => {
  it('answers an unknown model with the text alone, status and gateway headers kept', async () => {
    const r = await post('/gw/localrunner/api/chat', chat('no-such-model'), { origin: 'https://app.example' });
    expect(r.status).toBe(404);
    const body = JSON.parse(r.body);
    expect(Object.keys(body)).toEqual(['error']);
    expect(body.error).toMatch(/^model no-such-model(:latest)? is not served by any localrunner endpoint/);
    expect(r.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(r.headers['x-gw-request-id']).toMatch(/^req-/);
    expect(r.headers['access-control-allow-origin']).toBe('*');
    expect(local.traffic.filter((t) => t.url === '/api/chat')).toHaveLength(0);
  });

  it('answers a path outside the allowlist, and the routes the gateway answers itself, the same way', async () => {
    const unlisted = await rawRequest(`${gw.url}/gw/localrunner/api/nope`);
    expect(unlisted.status).toBe(404);
    expect(JSON.parse(unlisted.body)).toEqual({
      error: 'path /api/nope is not in the localrunner allowlist (profile api.paths); the backend was not contacted',
    });
    const wrongMethod = await post('/gw/localrunner/api/tags', {});
    expect(wrongMethod.status).toBe(405);
    expect(wrongMethod.headers.allow).toBe('GET, HEAD');
    expect(typeof JSON.parse(wrongMethod.body).error).toBe('string');
  });

  it("keeps the envelope on the family's OpenAI-compatible routes", async () => {
    const r = await post('/gw/localrunner/v1/chat/completions', chat('no-such-model'));
    expect(r.status).toBe(404);
    expect(JSON.parse(r.body).error).toMatchObject({ type: 'not_found', code: 'MODEL_NOT_FOUND', message: expect.stringContaining('no-such-model') });
  });

  it("answers the messages API on the family route in that API's shape", async () => {
    const r = await post('/gw/localrunner/v1/messages', { model: 'no-such-model', max_tokens: 8, messages: [{ role: 'user', content: 'hi' }] });
    expect(r.status).toBe(404);
    expect(JSON.parse(r.body)).toMatchObject({
      type: 'error',
      error: { type: 'not_found_error', code: 'MODEL_NOT_FOUND', message: expect.stringContaining('no-such-model') },
    });
  });
});

describe('cppengine native routes: {"error": {"code", "message", "type"}}', () => {
  it.each(['/completion', '/tokenize', '/slots/0'])("answers %s with the server's own shape and type for the status", async (path) => {
    // A query does not change the path's shape.
    const r =
      path === '/slots/0' ? await rawRequest(`${gw.url}/gw/cppengine${path}?action=save`) : await post(`/gw/cppengine${path}`, { prompt: 'hi', content: 'hi' });
    expect(r.status).toBe(503);
    const body = JSON.parse(r.body);
    expect(Object.keys(body.error).sort()).toEqual(['code', 'message', 'type']);
    expect(body.error).toMatchObject({ code: 503, type: 'unavailable_error', message: expect.stringContaining('no healthy endpoint for provider cppengine') });
  });

  it('keeps the envelope on its OpenAI-compatible routes', async () => {
    const r = await post('/gw/cppengine/v1/chat/completions', chat('m'));
    expect(r.status).toBe(503);
    expect(JSON.parse(r.body).error).toMatchObject({ type: 'endpoint_unavailable', code: 503 });
  });
});

describe('routes that keep the envelope', () => {
  it("deskrunner's native REST routes (the server's own errors there are OpenAI-style)", async () => {
    const r = await post('/gw/deskrunner/api/v0/chat/completions', chat('no-such-model'));
    expect(r.status).toBe(404);
    expect(JSON.parse(r.body).error).toMatchObject({ type: 'not_found', code: 'MODEL_NOT_FOUND' });
  });

  it('an unknown prefix: no family, so no family shape', async () => {
    const r = await post('/gw/nosuchfamily/api/chat', chat('m'));
    expect(r.status).toBe(404);
    expect(JSON.parse(r.body).error).toMatchObject({ type: 'not_found', code: 'ROUTE_NOT_FOUND' });
  });
});

describe('Retry-After in the native shape', () => {
  it("a per-address limit (refused before the prefix is stripped) answers in the route's shape, with its headers", async () => {
    const limited = await new FakeBackend({ family: 'localrunner', name: 'limited' }).start();
    // The clock stands still: the one token is spent and never refills.
    const g = await startGateway(
      {
        server: {
          rate_limits: {
            global_requests_per_minute: 0,
            per_ip_requests_per_minute: 6,
            health_requests_per_minute: 0,
            internal_requests_per_minute: 0,
            burst_size: 1,
            per_endpoint: { default_requests_per_minute: 0 },
          },
        },
        discovery: { static: { endpoints: [endpoint('limited', 'localrunner', limited.url)] } },
      },
      {},
      () => 0,
    );
    try {
      await waitFor(() => g.gw.backends.endpoints.all.every((e) => e.state === 'healthy'), 'the endpoint to be healthy');
      expect((await rawRequest(`${g.url}/gw/localrunner/api/version`)).status).toBe(200);
      const r = await rawRequest(`${g.url}/gw/localrunner/api/version`);
      expect(r.status).toBe(429);
      expect(r.headers['retry-after']).toBe('10');
      expect(r.headers['x-ratelimit-remaining']).toBe('0');
      expect(JSON.parse(r.body)).toEqual({ error: expect.stringMatching(/^rate limit exceeded: .*retry after 10s$/) });
    } finally {
      await closeAll(g, [limited]);
    }
  });
});
