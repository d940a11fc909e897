// The Redis client (ioredis), loaded the first time one is made: a gateway that keeps its rate
// limits in memory — the default — never loads it (it costs about 60 ms and a few MB at start).
import { createRequire } from 'node:module';
import type { Redis, RedisOptions } from 'ioredis';

let RedisClass: (new (url: string, options: RedisOptions) => Redis) | undefined;

export function redisClient(url: string, options: RedisOptions): Redis {
  RedisClass ??= (createRequire(import.meta.url)('ioredis') as { Redis: new (url: string, options: RedisOptions) => Redis }).Redis;
  return new RedisClass(url, options);
}
