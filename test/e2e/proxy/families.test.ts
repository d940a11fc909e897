// Every family's prefixes reach a fake of that family with the prefix stripped; paths outside the
// allowlist are refused without contacting the backend.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { loadProfiles, mountedPrefixes } from '../../../engine/core/profiles.js';
import { FakeBackend } from '../../../engine/demo/index.js';
import { endpoint, startGateway, type Started } from '../../helpers/gateway.js';

const profiles = loadProfiles('/nonexistent');
const fakes = new Map<string, FakeBackend>();
let gw: Started;

beforeAll(async () => {
  for (const p of profiles.list) fakes.set(p.name, await new FakeBackend({ family: p.name }).start());
  gw = await startGateway({
    proxy: { enable_optional_prefixes: true },
    discovery: { static: { endpoints: profiles.list.map((p) => endpoint(`${p.name}-1`, p.name, fakes.get(p.name)!.url)) } },
  });
});

afterAll(async () => {
  await gw.close();
  for (const f of fakes.values()) await f.stop();
});

describe.each(profiles.list.map((p) => [p.name, p] as const))('family %s', (name, profile) => {
  it.each(mountedPrefixes(profile, true))('prefix %s forwards with the prefix stripped and the query kept', async (prefix) => {
    const fake = fakes.get(name)!;
    const intercepted = new Set(profile.api.intercepts.map((i) => i.path));
    const path = profile.api.paths.find((p) => p.includes('models') && !intercepted.has(p)) ?? profile.api.paths.find((p) => !intercepted.has(p))!;
    fake.received.length = 0;
    const res = await request(`${gw.url}/gw/${prefix}${path}?probe=${prefix}`);
    const body = await res.body.text();
    expect(res.statusCode, body).toBe(200);
    expect(res.headers['x-gw-endpoint']).toBe(`${name}-1`);
    expect(res.headers['x-gw-backend-type']).toBe(name);
    expect(fake.received.map((r) => r.url)).toContain(`${path}?probe=${prefix}`);
  });

  it('refuses a path outside the allowlist without contacting the backend', async () => {
    const fake = fakes.get(name)!;
    fake.received.length = 0;
    const res = await request(`${gw.url}/gw/${profile.routing.prefixes[0]}/definitely/not/allowed`, { method: 'POST', body: '{}' });
    const body = (await res.body.json()) as any;
    if (profile.api.forward_all) {
      expect(res.statusCode).toBe(200);
      expect(fake.received.some((r) => r.url === '/definitely/not/allowed')).toBe(true);
      return;
    }
    expect(res.statusCode).toBe(404);
    expect(body.error.type).toBe('not_found');
    expect(body.error.message).toContain('/definitely/not/allowed');
    expect(fake.received.filter((r) => r.url === '/definitely/not/allowed')).toHaveLength(0);
  });
});
