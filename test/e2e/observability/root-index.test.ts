// GET / : a pointer to where things are instead of a bare 404 — JSON for API clients, a redirect
// to the dashboard for a browser it lets in. Every other unknown path is still ROUTE_NOT_FOUND.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { FakeBackend } from '../../../engine/demo/index.js';
import { closeAll, endpoint, startGateway, type Started } from '../../helpers/gateway.js';

const BROWSER = { accept: 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8' };

let local: FakeBackend, gw: Started;

beforeAll(async () => {
  local = await new FakeBackend({ family: 'localrunner', name: 'local', models: [{ name: 'llama3.1:8b' }] }).start();
  gw = await startGateway({ discovery: { static: { endpoints: [endpoint('local', 'localrunner', local.url)] } } });
});
afterAll(() => closeAll(gw, [local]));

describe('GET /', () => {
  it('answers an API client with JSON pointing to the dashboard, the model list, status, health and the family prefixes', async () => {
    const res = await request(`${gw.url}/`);
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(res.headers.vary).toBe('accept');
    const json = (await res.body.json()) as any;
    expect(json).toMatchObject({
      service: 'inference-gateway',
      version: expect.any(String),
      message: expect.stringContaining('/gw/models'),
      links: {
        dashboard: '/internal/ui/',
        models: '/gw/models',
        openai_models: '/gw/openai/v1/models',
        status: '/internal/status',
        health: '/internal/health',
        ready: '/internal/ready',
        msgapi_models: '/gw/msgapi/v1/models',
        version: '/version',
      },
    });
    expect(json.hint).toBeUndefined();
    expect(json.families.localrunner).toEqual({ prefixes: ['/gw/localrunner/', '/gw/ollama/'], endpoints: 1 });
    expect(json.families['hosted-compatible']).toEqual({ prefixes: ['/gw/hosted/', '/gw/hosted-compatible/'], endpoints: 0 });
    // Every link it gives is served.
    for (const path of Object.values(json.links) as string[]) {
      const linked = await request(`${gw.url}${path}`);
      await linked.body.dump();
      expect(linked.statusCode, path).toBe(200);
    }
  });

  it('answers HEAD with the same head and no body', async () => {
    const get = await request(`${gw.url}/`);
    const body = await get.body.text();
    const head = await request(`${gw.url}/`, { method: 'HEAD' });
    expect(head.statusCode).toBe(200);
    expect(head.headers['content-length']).toBe(String(Buffer.byteLength(body)));
    expect(await head.body.text()).toBe('');
  });

  it('sends a browser the dashboard lets in to /internal/ui/', async () => {
    const res = await request(`${gw.url}/`, { headers: BROWSER });
    expect(res.statusCode).toBe(302);
    expect(res.headers.location).toBe('/internal/ui/');
    expect(res.headers.vary).toBe('accept');
    await res.body.dump();
    expect((await request(`${gw.url}/`, { method: 'HEAD', headers: BROWSER })).statusCode).toBe(302);
  });

  it('leaves every other unknown route a 404, POST / included', async () => {
    for (const [method, path] of [
      ['GET', '/index.html'],
      ['GET', '/gw'],
      ['POST', '/'],
    ] as const) {
      const res = await request(`${gw.url}${path}`, { method });
      expect(res.statusCode).toBe(404);
      expect(((await res.body.json()) as any).error.code).toBe('ROUTE_NOT_FOUND');
    }
  });
});

describe('GET / when the dashboard is not for this client', () => {
  it('gives a browser the JSON when the dashboard is off (no dashboard link) or its policy keeps the client out', async () => {
    const off = await startGateway({ dashboard: { enabled: false }, translators: { msgapi: { enabled: false } }, discovery: { static: { endpoints: [] } } });
    const closed = await startGateway({ dashboard: { access_policy: { allowed_cidrs: ['10.0.0.0/8'] } }, discovery: { static: { endpoints: [] } } });
    try {
      const res = await request(`${off.url}/`, { headers: BROWSER });
      expect(res.statusCode).toBe(200);
      const json = (await res.body.json()) as any;
      expect(json.links.dashboard).toBeUndefined();
      expect(json.links.msgapi_models).toBeUndefined();
      // A gateway with no endpoint says how to add one.
      expect(json.hint).toContain('discovery.static.endpoints');
      const kept = await request(`${closed.url}/`, { headers: BROWSER });
      expect(kept.statusCode).toBe(200);
      expect(((await kept.body.json()) as any).links.dashboard).toBe('/internal/ui/');
    } finally {
      await off.close();
      await closed.close();
    }
  });
});
