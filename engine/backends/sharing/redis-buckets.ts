// Rate-limit buckets shared by every gateway replica through Redis (server.rate_limits.store:
// redis): the same token buckets as the in-memory store (rate-buckets.ts), each take one atomic
// Lua script on the Redis server, timed by the server's clock (replicas' clocks may differ). A
// replica whose Redis is unreachable, slow or failing lets the request through (fails open: a
// rate limit must not take the gateway down with it), counts it, and warns at most every 30 s;
// ioredis reconnects in the background and the shared limits hold again once it is back.
import type { Redis } from 'ioredis';
import { failFastClient } from './redis-client.js';
import type { Logger } from 'pino';
import { reportOf, UNIT, type SharedTake, type TakeAnswer } from '../token-bucket.js';

/** Take a token from each of the buckets KEYS (ARGV: each one's refill per ms and capacity, in
 *  units), all or none: the first bucket without a whole token refuses the request and nothing is
 *  taken (the in-memory store's order: the client's bucket, then the global one). Bucket state:
 *  units and when they were counted, by the server's clock; a key expires once its bucket would
 *  be full again (a full bucket is the same as none). Returns the refusing bucket's place (0:
 *  none), then each bucket's units. */
const TAKE = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local units, refused = {}, 0
for i = 1, #KEYS do
  local per_ms, capacity = tonumber(ARGV[2 * i - 1]), tonumber(ARGV[2 * i])
  local b = redis.call('HMGET', KEYS[i], 'u', 'at')
  local u = tonumber(b[1]) or capacity
  u = math.min(capacity, u + math.max(0, now - (tonumber(b[2]) or now)) * per_ms)
  units[i] = u
  if refused == 0 and u < ${UNIT} then refused = i end
end
local out = {refused}
for i = 1, #KEYS do
  local per_ms, capacity = tonumber(ARGV[2 * i - 1]), tonumber(ARGV[2 * i])
  if refused == 0 then units[i] = units[i] - ${UNIT} end
  redis.call('HSET', KEYS[i], 'u', units[i], 'at', now)
  redis.call('PEXPIRE', KEYS[i], math.ceil((capacity - units[i]) / per_ms) + 1000)
  out[i + 1] = units[i]
end
return out
`;

/** `password`: from password_file (the URL may hold one too). */
export interface RedisSettings {
  url: string;
  password?: string;
  key_prefix: string;
  timeout: number;
}

type TakeCommand = (...args: Array<string | number>) => Promise<number[]>;

export class RedisBucketStore {
  /** Takes let through because Redis could not answer. */
  failures = 0;
  private readonly redis: Redis;
  private lastWarning = 0;
  private lastError = '';

  constructor(
    readonly settings: RedisSettings,
    private readonly log: Logger,
    private readonly onFailure: () => void = () => undefined,
  ) {
    this.redis = failFastClient(settings);
    // The number of keys comes first in each call (a request takes from one bucket or two).
    this.redis.defineCommand('gwTake', { lua: TAKE });
    // Connection errors are reported through the takes that fail (the last one named there:
    // a wrong password and a refused connection read alike otherwise); ioredis retries by itself.
    this.redis.on('error', (err: Error) => (this.lastError = err.message));
  }

  /** A token from each bucket, all or none, in one round trip: each bucket as the take left it,
   *  and the first that refused (-1: none). When Redis cannot answer, every bucket lets it through. */
  async take(takes: readonly SharedTake[]): Promise<TakeAnswer> {
    const capacity = (t: SharedTake) => Math.max(1, t.rate.burst) * UNIT;
    try {
      const args: Array<string | number> = [takes.length];
      for (const t of takes) args.push(this.keyOf(t.scope, t.key));
      for (const t of takes) args.push(t.rate.perMinute, capacity(t));
      const [refused, ...units] = await (this.redis as unknown as { gwTake: TakeCommand }).gwTake(...args);
      return { takes: takes.map((t, i) => reportOf(Number(units[i]), capacity(t), t.rate.perMinute, refused === 0 || refused > i + 1)), refused: refused - 1 };
    } catch (err) {
      this.failed(err as Error);
      return { takes: takes.map((t) => reportOf(capacity(t), capacity(t), t.rate.perMinute, true)), refused: -1 };
    }
  }

  /** Connected now: takes are answered by Redis (until then, and while it is away, they pass). */
  get connected(): boolean {
    return this.redis.status === 'ready';
  }

  close(): void {
    this.redis.disconnect();
  }

  private keyOf(scope: string, key: string): string {
    return `${this.settings.key_prefix}:rl:${scope}:${key}`;
  }

  private failed(err: Error): void {
    this.failures++;
    this.onFailure();
    const now = Date.now();
    if (now - this.lastWarning < 30_000) return;
    this.lastWarning = now;
    // The URL's password, if any, stays out of the log: the host and port say which Redis.
    const { host, port } = this.redis.options;
    this.log.warn(
      { redis: `${host}:${port}`, error: err.message, cause: this.lastError || undefined, failures: this.failures },
      'rate-limit store unreachable: requests pass unlimited until it answers',
    );
  }
}
