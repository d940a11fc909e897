// The Redis client (ioredis), loaded the first time one is made: a gateway that keeps its rate
// limits in memory — the default — never loads it (it costs about 60 ms and a few MB at start).
import { createRequire } from 'node:module';
import type { Redis, RedisOptions } from 'ioredis';

let RedisClass: (new (url: string, options: RedisOptions) => Redis) | undefined;

export function redisClient(url: string, options: RedisOptions): Redis {
  RedisClass ??= (createRequire(import.meta.url)('ioredis') as { Redis: new (url: string, options: RedisOptions) => Redis }).Redis;
  return new RedisClass(url, options);
}

/** A client for what must answer a request at once or not at all (the limits, the usage): a
 *  command that cannot be answered now fails at once (and the request goes through) rather than
 *  waiting in a queue for a Redis that is down. */
export function failFastClient(settings: { url: string; password?: string; timeout: number }): Redis {
  return redisClient(settings.url, {
    ...(settings.password === undefined ? {} : { password: settings.password }),
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    commandTimeout: settings.timeout,
    connectTimeout: Math.max(1000, settings.timeout),
    lazyConnect: false,
  });
}
