// Rate-limit buckets shared by every gateway replica through Redis (server.rate_limits.store:
// redis): the same token buckets as the in-memory store (rate-buckets.ts), each take one atomic
// Lua script on the Redis server, timed by the server's clock (replicas' clocks may differ). A
// replica whose Redis is unreachable, slow or failing lets the request through (fails open: a
// rate limit must not take the gateway down with it), counts it, and warns at most every 30 s;
// ioredis reconnects in the background and the shared limits hold again once it is back.
import { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { reportOf, UNIT, type Rate, type Take } from './token-bucket.js';

/** Bucket state: units (tokens × UNIT) and when they were counted, by the server's clock; the key
 *  expires once the bucket would be full again (a full bucket is the same as none). */
const TAKE = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local per_ms = tonumber(ARGV[1])
local capacity = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
local b = redis.call('HMGET', KEYS[1], 'u', 'at')
local units = tonumber(b[1]) or capacity
local at = tonumber(b[2]) or now
units = math.min(capacity, units + math.max(0, now - at) * per_ms)
local allowed = 0
if cost <= 0 then
  units = math.min(capacity, units - cost)
  allowed = 1
elseif units >= cost then
  units = units - cost
  allowed = 1
end
redis.call('HSET', KEYS[1], 'u', units, 'at', now)
redis.call('PEXPIRE', KEYS[1], math.ceil((capacity - units) / per_ms) + 1000)
return {allowed, units}
`;

export interface RedisSettings { url: string; key_prefix: string; timeout: number }

type TakeCommand = (key: string, perMs: number, capacity: number, cost: number) => Promise<[number, number]>;

export class RedisBucketStore {
  /** Takes let through because Redis could not answer. */
  failures = 0;
  private readonly redis: Redis;
  private lastWarning = 0;

  constructor(readonly settings: RedisSettings, private readonly log: Logger, private readonly onFailure: () => void = () => undefined) {
    this.redis = new Redis(settings.url, {
      // A take that cannot be answered now fails at once (and the request goes through) rather
      // than waiting in a queue for a Redis that is down.
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      commandTimeout: settings.timeout,
      connectTimeout: Math.max(1000, settings.timeout),
      lazyConnect: false,
    });
    this.redis.defineCommand('gwTake', { numberOfKeys: 1, lua: TAKE });
    // Connection errors are reported through the takes that fail; ioredis retries by itself.
    this.redis.on('error', () => undefined);
  }

  /** Take a token from the shared bucket `scope:key`; let it through when Redis cannot answer. */
  async take(scope: string, key: string, rate: Rate): Promise<Take> {
    const capacity = Math.max(1, rate.burst) * UNIT;
    try {
      const [allowed, units] = await (this.redis as unknown as { gwTake: TakeCommand }).gwTake(this.keyOf(scope, key), rate.perMinute, capacity, UNIT);
      return reportOf(Number(units), capacity, rate.perMinute, allowed === 1);
    } catch (err) {
      this.failed(err as Error);
      return reportOf(capacity, capacity, rate.perMinute, true);
    }
  }

  /** Give back a token taken for a request that was not served after all (best effort). */
  async refund(scope: string, key: string, rate: Rate): Promise<void> {
    try {
      await (this.redis as unknown as { gwTake: TakeCommand }).gwTake(this.keyOf(scope, key), rate.perMinute, Math.max(1, rate.burst) * UNIT, -UNIT);
    } catch (err) {
      this.failed(err as Error);
    }
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
    this.log.warn({ redis: `${host}:${port}`, error: err.message, failures: this.failures }, 'rate-limit store unreachable: requests pass unlimited until it answers');
  }
}
