// What a built-in step does, a third-party plugin can: test/fixtures/packages/gw-third-party holds
// an endpoint selector, a translating terminal step and a rate limit written against the public
// API (`inference-gateway`) alone, copied into a folder outside the repository with nothing
// installed, and served by `gw serve` started from that folder.
import type { ChildProcess } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { stringify } from 'yaml';
import { FakeBackend } from '../../../engine/demo/index.js';
import { cleanEnv, serve, stopServing } from '../../helpers/cli.js';

let near: FakeBackend, far: FakeBackend, other: FakeBackend;
let child: ChildProcess | undefined;
let base: string;

beforeAll(async () => {
  const folder = mkdtempSync(join(tmpdir(), 'gw-third-party-'));
  cpSync(resolve('test/fixtures/packages/gw-third-party'), join(folder, 'plugins', 'gw-third-party'), { recursive: true });
  mkdirSync(join(folder, 'pipelines'));
  writeFileSync(
    join(folder, 'pipelines', 'ask.yaml'),
    stringify({
      name: 'ask',
      mount: { paths: ['/ask'], methods: ['POST'] },
      steps: [
        { use: 'read-body' },
        // A token a minute, three at once: four requests in a row see the bucket empty, however slowly they run.
        { use: 'key-limit', with: { per_minute: 1, burst: 3 } },
        { use: 'pick-endpoint', with: { prefer: 'near', nicknames: { smart: 'model-b' } } },
        { use: 'upstream-headers' },
        { use: 'ask' },
      ],
    }),
  );
  near = await new FakeBackend({ family: 'pagedengine', name: 'near', models: [{ name: 'model-a' }, { name: 'model-b' }] }).start();
  far = await new FakeBackend({ family: 'pagedengine', name: 'far', models: [{ name: 'model-a' }, { name: 'model-b' }] }).start();
  other = await new FakeBackend({ family: 'pagedengine', name: 'other', models: [{ name: 'model-c' }] }).start();
  writeFileSync(
    join(folder, 'config.yaml'),
    stringify({
      // The built-in limits off: the replies' X-RateLimit-* are the plugin's alone.
      server: { host: '127.0.0.1', port: 0, rate_limits: { global_requests_per_minute: 0, per_ip_requests_per_minute: 0 } },
      plugins: ['./plugins/gw-third-party'],
      pipelines: { dir: './pipelines' },
      discovery: { static: { endpoints: [far, near, other].map((f) => ({ name: f.name, type: 'pagedengine', url: f.url, check_interval: '1s' })) } },
    }),
  );
  const started = await serve(['--config', 'config.yaml'], cleanEnv(), folder);
  child = started.child;
  base = `http://127.0.0.1:${started.port}`;
});

afterAll(async () => {
  await stopServing(child);
  await Promise.all([near, far, other].map((f) => f?.stop()));
});

async function askFor(body: object, key = 'k1') {
  const res = await request(`${base}/ask`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-api-key': key }, body: JSON.stringify(body) });
  return { status: res.statusCode, headers: res.headers, json: (await res.body.json()) as any };
}

/** The models the fake engines were asked for, by engine, since the last call. */
const asked = () => {
  const out = seen();
  for (const f of [near, far, other]) f.received.length = 0;
  return out;
};
const seen = () =>
  Object.fromEntries([near, far, other].map((f) => [f.name, f.traffic.filter((r) => r.url === '/v1/chat/completions').map((r) => r.json.model)]));

describe('a third-party selector, terminal step and rate limit, from a folder of their own', () => {
  it("selects like select-endpoint and translates like translate: the preferred engine, its chat reply in the API's shape", async () => {
    asked();
    const r = await askFor({ model: 'model-a', ask: 'hello?' }, 'k-select');
    expect(r.status).toBe(200);
    expect(r.json).toEqual({ answer: expect.any(String), model: 'model-a' });
    expect(r.headers['x-gw-endpoint']).toBe('near');
    expect(r.headers['x-gw-routing-reason']).toBe('third_party');
    expect(asked()).toEqual({ near: ['model-a'], far: [], other: [] });
  });

  it("each candidate is sent the name the plan gives it (a nickname's real name)", async () => {
    asked();
    const r = await askFor({ model: 'smart', ask: 'who are you?' }, 'k-nick');
    expect(r.status).toBe(200);
    expect(r.json.model).toBe('model-b');
    expect(asked()).toEqual({ near: ['model-b'], far: [], other: [] });
  });

  it("fails over through the gateway's attempt loop when the preferred engine fails", async () => {
    near.behaviour.status = 503;
    asked();
    const r = await askFor({ model: 'model-a', ask: 'still there?' }, 'k-failover');
    near.behaviour.status = 0;
    expect(r.status).toBe(200);
    expect(r.headers['x-gw-endpoint']).toBe('far');
    expect(asked()).toEqual({ near: ['model-a'], far: ['model-a'], other: [] });
  });

  it("refuses what nothing serves, in the gateway's error envelope", async () => {
    const r = await askFor({ model: 'nobody-has-it', ask: 'x' }, 'k-missing');
    expect(r.status).toBe(404);
    expect(r.json.error).toMatchObject({ type: 'not_found', code: 'MODEL_NOT_FOUND' });
    const bad = await askFor({ model: 'model-a' }, 'k-bad');
    expect(bad.status).toBe(400);
  });

  it('limits each key like rate-limit limits an address: X-RateLimit-* on its replies, then 429 with Retry-After', async () => {
    const replies = [];
    for (let i = 0; i < 4; i++) replies.push(await askFor({ model: 'model-a', ask: `n${i}` }, 'k-limited'));
    expect(replies.map((r) => r.status)).toEqual([200, 200, 200, 429]);
    expect(replies.map((r) => r.headers['x-ratelimit-remaining'])).toEqual(['2', '1', '0', '0']);
    expect(replies[3].json.error.code).toBe('RATE_LIMITED');
    expect(Number(replies[3].headers['retry-after'])).toBeGreaterThan(0);
    // Another key has its own bucket.
    expect((await askFor({ model: 'model-a', ask: 'x' }, 'k-other')).status).toBe(200);
  });
});
