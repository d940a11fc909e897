// Replicas sharing Redis (server.rate_limits.store: redis) keep one usage ledger: one key's token
// limit and concurrency hold across them, and either reports what both counted. Needs a real
// redis-server (test/helpers/redis.ts).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { keyHash } from '../../../engine/core/keys.js';
import { FakeBackend } from '../../../engine/demo/index.js';
import { closeAll, endpoint, NO_RATE_LIMITS, startGateway, type Started } from '../../helpers/gateway.js';
import { haveRedis, RedisServer } from '../../helpers/redis.js';
import { waitFor } from '../../helpers/wait.js';

const OPS = 'gw-ops-secret-redis';
const USER = 'gw-user-secret-redis';
const ONE = 'gw-one-secret-redis';

describe.skipIf(!haveRedis)('the usage ledger shared by replicas through Redis', () => {
  const redis = new RedisServer();
  let fake: FakeBackend;
  let replicas: Started[] = [];

  beforeAll(async () => {
    await redis.start();
    fake = await new FakeBackend({ family: 'pagedengine', name: 'paged', models: [{ name: 'model-a' }] }).start();
    const config = {
      auth: {
        keys: [
          { name: 'ops', hash: keyHash(OPS) },
          { name: 'user', hash: keyHash(USER), tokens_per_day: 400 },
          { name: 'one', hash: keyHash(ONE), max_concurrent: 1 },
        ],
        admin: ['ops'],
      },
      server: { rate_limits: { ...NO_RATE_LIMITS, store: 'redis', redis: { url: redis.url, key_prefix: `gw-usage-${Date.now()}`, timeout: '2s' } } },
      discovery: { static: { endpoints: [endpoint('paged', 'pagedengine', fake.url, { check_interval: '60s' })] } },
    };
    for (let i = 0; i < 2; i++) replicas.push(await startGateway(config));
    await waitFor(() => replicas.every((r) => r.gw.backends.fleet.usage?.connected) || undefined, 'both replicas connected to Redis');
  }, 60_000);
  afterAll(async () => {
    for (const r of replicas) await closeAll(r, []);
    replicas = [];
    await fake?.stop();
    await redis.stop();
  });

  const post = async (r: Started, key: string, max = 100) => {
    const res = await request(`${r.url}/gw/pagedengine/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'model-a', max_tokens: max, messages: [{ role: 'user', content: 'hi' }] }),
    });
    await res.body.dump();
    return res.statusCode;
  };
  const usage = async (r: Started, name: string) => {
    const res = await request(`${r.url}/internal/usage?key=${name}`, { headers: { authorization: `Bearer ${OPS}` } });
    return ((await res.body.json()) as any).keys[name];
  };

  it('one day budget across replicas: requests alternate until the budget cannot hold the next, on either', async () => {
    const statuses: number[] = [];
    let admitted = 0;
    for (let i = 0; i < 60 && !statuses.includes(429); i++) {
      statuses.push(await post(replicas[i % 2], USER));
      admitted = statuses.filter((s) => s === 200).length;
      // A request is filed when it is over, a moment after its client has the reply: until then
      // its reservation (more than it used) counts, and a next one checked meanwhile sees more
      // spent than the one after it will.
      await waitFor(async () => ((await usage(replicas[0], 'user')).total.all.requests === admitted ? true : undefined), 'the request filed');
    }
    expect(statuses.at(-1)).toBe(429);
    expect(admitted).toBeGreaterThan(2);
    // The other replica refuses too, and both report the one count.
    expect(await post(replicas[statuses.length % 2], USER)).toBe(429);
    const [a, b] = [await usage(replicas[0], 'user'), await usage(replicas[1], 'user')];
    expect(a.total).toEqual(b.total);
    expect(a.budget.tokens_per_day).toMatchObject({ limit: 400, used: a.total.all.input_tokens + a.total.all.output_tokens });
  });

  it('one max_concurrent across replicas', async () => {
    let release!: () => void;
    fake.behaviour.holdUntil = new Promise((r) => (release = r));
    const held = post(replicas[0], ONE);
    await waitFor(async () => ((await usage(replicas[1], 'one')).in_flight === 1 ? true : undefined), 'the first request under way');
    expect(await post(replicas[1], ONE)).toBe(429);
    release();
    expect(await held).toBe(200);
    await waitFor(async () => ((await usage(replicas[1], 'one')).in_flight === 0 ? true : undefined), 'the first request settled');
    expect(await post(replicas[1], ONE)).toBe(200);
  });
});
