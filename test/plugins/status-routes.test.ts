// version and health-report over real HTTP.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { FakeBackend } from '../../engine/demo/index.js';
import { endpoint, startGateway, type Started } from '../helpers/gateway.js';

let fake: FakeBackend, gw: Started;
beforeAll(async () => {
  fake = await new FakeBackend({ family: 'pagedengine' }).start();
  gw = await startGateway({
    discovery: { static: { endpoints: [endpoint('up', 'pagedengine', fake.url), endpoint('down', 'mlxsingle', 'http://127.0.0.1:1')] } },
  });
});
afterAll(async () => {
  await gw.close();
  await fake.stop();
});

describe('version', () => {
  it('answers the version and build data', async () => {
    const body = (await (await request(`${gw.url}/version`)).body.json()) as any;
    expect(body.version).toMatch(/^\d+\.\d+\.\d+/);
    expect(Object.keys(body.build)).toEqual(['version', 'commit', 'date', 'go_version']);
  });
});

describe('health-report', () => {
  it('reports degraded with one record per endpoint', async () => {
    const body = (await (await request(`${gw.url}/internal/health`)).body.json()) as any;
    expect(body.status).toBe('degraded');
    expect(body.uptime).toMatch(/^\d+(\.\d+)?(ms|s|m)$/);
    expect(new Date(body.timestamp).toISOString()).toBe(body.timestamp);
    expect(body.endpoints.map((e: any) => [e.name, e.status])).toEqual([
      ['up', 'healthy'],
      ['down', 'unhealthy'],
    ]);
    expect(body.endpoints[0].latency).toMatch(/ms$/);
    expect(body.endpoints[0].url).toBe(fake.url);
  });
});
