// Rate limits shared by replicas (issue 22, server.rate_limits.store: redis): three gateways on
// loopback sharing a real redis-server hold one client's per-IP limit across them (within the
// burst), and when Redis stops mid-run they let requests through (fail open) with a warning and
// a metric, and hold the limit again once it is back. The test starts its own redis-server on a
// free port (Debian's package; .ci/run installs it) and is skipped where there is none, unless
// GW_REQUIRE_REDIS=1.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { FakeBackend } from '../../../engine/demo/index.js';
import { writeFileSync } from 'node:fs';
import { stringify } from 'yaml';
import { closeAll, endpoint, NO_RATE_LIMITS, startGateway, type Started } from '../../helpers/gateway.js';
import { haveRedis, RedisServer } from '../../helpers/redis.js';
import { waitFor } from '../../helpers/wait.js';

const redis = new RedisServer();

describe.skipIf(!haveRedis)('server.rate_limits.store: redis', () => {
  let replicas: Started[] = [];
  // One token a minute: nothing refills while a test runs, however busy the machine.
  const PER_MINUTE = 1;
  const BURST = 5;

  beforeAll(async () => {
    await redis.start();
    const limits = {
      global_requests_per_minute: 0,
      per_ip_requests_per_minute: PER_MINUTE,
      health_requests_per_minute: 1000,
      internal_requests_per_minute: 0,
      burst_size: BURST,
      per_endpoint: { default_requests_per_minute: 0 },
      store: 'redis',
      redis: { url: redis.url, key_prefix: 'gw-test', timeout: '500ms' },
    };
    for (let i = 0; i < 3; i++) replicas.push(await startGateway({ server: { rate_limits: limits }, discovery: { static: { endpoints: [] } } }));
    await waitFor(() => replicas.every((r) => r.gw.backends.fleet.buckets?.connected) || undefined, 'every replica connected to Redis');
  }, 60_000);
  afterAll(async () => {
    for (const r of replicas) await closeAll(r, []);
    replicas = [];
    await redis.stop();
  });

  /** One request from this client to a replica: its status. */
  const hit = async (r: Started) => {
    const res = await request(`${r.url}/version`);
    await res.body.dump();
    return res.statusCode;
  };

  it("one client's per-IP limit holds across three replicas (within the burst), 429 from whichever replica it reaches", async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 15; i++) statuses.push(await hit(replicas[i % 3]));
    const allowed = statuses.filter((s) => s === 200).length;
    // The burst, and at most the one token a minute refills (the requests would have to take a minute).
    expect(allowed).toBeGreaterThanOrEqual(BURST);
    expect(allowed).toBeLessThanOrEqual(BURST + 1);
    expect(statuses.slice(BURST + 1)).not.toContain(200);
    // Each replica refused some: the bucket is the same everywhere.
    for (let k = 0; k < 3; k++) expect(statuses.filter((s, i) => i % 3 === k && s === 429).length).toBeGreaterThan(0);
    // Memory alone would have let 3 × 5 through.
    expect(replicas.reduce((n, r) => n + r.gw.runtime.stats.rateLimited.ip, 0)).toBe(15 - allowed);
  });

  it("takes from the client's bucket and the global one together, all or none: a global refusal charges the client nothing", async () => {
    const { RedisBucketStore } = await import('../../../engine/backends/sharing/redis-buckets.js');
    const store = new RedisBucketStore({ url: redis.url, key_prefix: 'gw-unit', timeout: 500 }, replicas[0].gw.runtime.log);
    try {
      await waitFor(() => store.connected || undefined, 'the store connected');
      // One token a minute: nothing refills while the test runs, however slow the machine.
      const client = { scope: 'ip', key: 'c1', rate: { perMinute: 1, burst: 3 } };
      const global = { scope: 'global', key: '', rate: { perMinute: 1, burst: 1 } };
      const first = await store.take([client, global]);
      expect(first.refused).toBe(-1);
      expect(first.takes.map((t) => t.remaining)).toEqual([2, 0]);
      const second = await store.take([client, global]);
      expect(second.refused).toBe(1); // the global bucket is empty
      expect(second.takes[1]).toMatchObject({ allowed: false });
      expect(second.takes[1].retryAfterS).toBeGreaterThan(0);
      // The client's bucket was not charged for the refused request.
      const alone = await store.take([client]);
      expect(alone.takes[0]).toMatchObject({ allowed: true, remaining: 1 });
    } finally {
      store.close();
    }
  });

  it('a reload switches the store: memory → redis → memory, a bad URL refused with the store kept', async () => {
    const base = {
      server: { host: '127.0.0.1', port: 0, shutdown_timeout: '2s', rate_limits: { ...NO_RATE_LIMITS, per_ip_requests_per_minute: 100 } },
      logging: { level: 'debug' },
      proxy: { profiles_dir: '/nonexistent/profiles' },
      pipelines: { dir: '/nonexistent/pipelines', watch: false },
      discovery: { static: { endpoints: [] } },
    };
    const g = await startGateway({ ...base });
    try {
      const fleet = g.gw.backends.fleet;
      expect(fleet.buckets).toBeNull();
      const write = (rate_limits: Record<string, unknown>) =>
        writeFileSync(g.configFile, stringify({ ...base, server: { ...base.server, rate_limits: { ...base.server.rate_limits, ...rate_limits } } }));
      write({ store: 'redis', redis: { url: redis.url, key_prefix: 'gw-reload' } });
      expect(await g.gw.reload('test')).toBe(true);
      const shared = fleet.buckets!;
      await waitFor(() => shared.connected || undefined, 'the store connected');
      write({ store: 'redis', redis: { url: 'redis://:hunter2@127.0.0.1:99999' } });
      expect(await g.gw.reload('test')).toBe(false);
      expect(fleet.buckets).toBe(shared);
      expect(JSON.stringify(g.gw.runtime.reload)).not.toContain('hunter2');
      write({ store: 'memory' });
      expect(await g.gw.reload('test')).toBe(true);
      expect(fleet.buckets).toBeNull();
      await waitFor(() => !shared.connected || undefined, 'the old client closed');
    } finally {
      await closeAll(g, []);
    }
  });

  it('Redis stopped mid-run: requests pass (fail open) with a warning and a metric; the limit holds again once it is back', async () => {
    await redis.stop();
    const statuses: number[] = [];
    for (let i = 0; i < 6; i++) statuses.push(await hit(replicas[i % 3]));
    expect(statuses).toEqual([200, 200, 200, 200, 200, 200]);
    const failures = replicas.reduce((n, r) => n + r.gw.runtime.stats.rateLimitStoreFailures, 0);
    expect(failures).toBeGreaterThanOrEqual(6);
    expect(replicas[0].logs.some((l) => l.msg.startsWith('rate-limit store unreachable') && !JSON.stringify(l).includes('redis://'))).toBe(true);
    // The probes' routes stay in memory: a Redis that is away or slow never holds them up.
    const before = replicas[0].gw.runtime.stats.rateLimitStoreFailures;
    for (const path of ['/internal/health', '/internal/ready']) await (await request(`${replicas[0].url}${path}`)).body.dump();
    expect(replicas[0].gw.runtime.stats.rateLimitStoreFailures).toBe(before);
    const metrics = await request(`${replicas[0].url}/internal/metrics`);
    expect(await metrics.body.text()).toMatch(/^gw_rate_limit_store_failures_total [1-9]/m);
    // Back: a fresh Redis (its buckets start full), the limit holds again.
    await redis.start();
    await waitFor(async () => ((await hit(replicas[0])) === 429 ? true : undefined), 'the shared limit holding again', 30_000);
  });
});

describe.skipIf(!haveRedis)('breaker openings and Retry-After pauses shared through the same Redis', () => {
  let replicas: Started[] = [];
  let fake: FakeBackend;
  let other: FakeBackend;

  beforeAll(async () => {
    await redis.start();
    fake = await new FakeBackend({ family: 'pagedengine', name: 'vllm', models: [{ name: 'm' }] }).start();
    other = await new FakeBackend({ family: 'pagedengine', name: 'vllm-2', models: [{ name: 'm2' }] }).start();
    const limits = {
      global_requests_per_minute: 0,
      per_ip_requests_per_minute: 0,
      health_requests_per_minute: 0,
      internal_requests_per_minute: 0,
      per_endpoint: { default_requests_per_minute: 0 },
      store: 'redis',
      redis: { url: redis.url, key_prefix: 'gw-evidence', timeout: '500ms' },
    };
    // Health checks far apart: what the test sees comes from requests and from the other replica.
    for (let i = 0; i < 2; i++)
      replicas.push(
        await startGateway({
          server: { rate_limits: limits },
          proxy: { max_retries: 0 },
          discovery: {
            static: {
              endpoints: [
                endpoint('vllm', 'pagedengine', fake.url, { check_interval: '1h' }),
                endpoint('vllm-2', 'pagedengine', other.url, { check_interval: '1h' }),
              ],
            },
          },
        }),
      );
    await waitFor(
      () => replicas.every((r) => r.gw.backends.fleet.evidence?.connected && r.gw.runtime.endpoints.all.every((e) => e.routable)) || undefined,
      'both replicas connected and the endpoints routable',
    );
  }, 60_000);
  afterAll(async () => {
    for (const r of replicas) await closeAll(r, []);
    replicas = [];
    await fake.stop();
    await other.stop();
    await redis.stop();
  });

  // Each request a different one: a backend failing them all (its breaker opens for everyone),
  // not one request failing again and again (an opening for that request alone: breaker.ts).
  let asked = 0;
  const chat = async (r: Started, model = 'm') => {
    const res = await request(`${r.url}/gw/pagedengine/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model, messages: [{ role: 'user', content: `hi ${++asked}` }] }),
    });
    await res.body.dump();
    return res.statusCode;
  };

  it('a breaker that requests opened on one replica opens on the other, which then sends it nothing', async () => {
    const [a, b] = replicas.map((r) => r.gw.runtime.endpoints.all[0]);
    fake.behaviour.status = 500;
    await waitFor(
      async () => {
        await chat(replicas[0]);
        return a.breaker.state === 'open' ? true : undefined;
      },
      "replica A's breaker open",
      30_000,
    );
    const opened = Date.now();
    await waitFor(() => (b.breaker.state === 'open' ? true : undefined), "replica B's breaker open from A's evidence");
    const seen = Date.now() - opened;
    expect(seen).toBeGreaterThanOrEqual(0); // how long it took is reported, not asserted (no timing margins)
    const before = fake.executions;
    expect(await chat(replicas[1])).toBe(503);
    expect(fake.executions).toBe(before);
    expect(replicas[1].gw.backends.fleet.evidence!.received).toBeGreaterThan(0);
    fake.behaviour.status = 0;
  });

  it('a Retry-After one replica was answered pauses the endpoint on the other', async () => {
    const b = replicas[1].gw.runtime.endpoints.all[1];
    expect(b.cooling(performance.now())).toBe(false);
    other.behaviour.status = 429;
    other.behaviour.replyHeaders = { 'retry-after': '30' };
    try {
      expect(await chat(replicas[0], 'm2')).toBe(429);
    } finally {
      other.behaviour.status = 0;
      other.behaviour.replyHeaders = {};
    }
    expect(replicas[0].gw.runtime.endpoints.all[1].cooling(performance.now())).toBe(true);
    await waitFor(() => (b.cooling(performance.now()) ? true : undefined), 'replica B paused');
    expect(b.coolingUntil - performance.now()).toBeGreaterThan(20_000);
  });
});
