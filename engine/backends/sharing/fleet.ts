// What the replicas of a fleet share, through one Redis, when server.rate_limits.store is redis:
// the global and per-address rate buckets (redis-buckets.ts), the keys' usage and token limits
// (redis-usage.ts), and what requests learn about an endpoint — breaker openings and Retry-After
// pauses (shared-evidence.ts). Made once with the
// backends' state; a reload switches the sharing on, off or to another Redis: a new client is
// made before the old one is closed, and one that cannot be made leaves the sharing as it was
// (the config's URL and password file were checked when it loaded). Without Redis, every method
// here does nothing and the facts stay with the host (sharing/scopes.ts).
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import type { Logger } from 'pino';
import type { GatewayConfig } from '../../core/config.js';
import { parseDuration } from '../../core/duration.js';
import { RedisBucketStore, type RedisSettings } from './redis-buckets.js';
import { RedisUsageBooks } from './redis-usage.js';
import { SharedEvidence, type Evidence } from './shared-evidence.js';

export type { Evidence } from './shared-evidence.js';

export class Fleet {
  /** The replicas' rate buckets; null: the rate limits are not shared (memory, or the host's). */
  buckets: RedisBucketStore | null = null;
  /** Breaker openings and pauses from and to the other replicas; null: not shared. */
  evidence: SharedEvidence | null = null;
  /** The keys' usage and token limits; null: kept by the host. */
  usage: RedisUsageBooks | null = null;

  /** `onStoreFailure`: a take Redis could not answer (it passed); `onEvidence`: what another
   *  replica's requests learnt about an endpoint. */
  constructor(
    private readonly log: Logger,
    private readonly onStoreFailure: () => void,
    private readonly onEvidence: (e: Evidence) => void,
  ) {}

  /** Take the rate limits' settings of a (re)loaded configuration. */
  configure(limits: GatewayConfig['server']['rate_limits']): void {
    if (limits.store !== 'redis') return this.close();
    const r = limits.redis;
    const settings: RedisSettings = {
      url: r.url,
      password: r.password_file === undefined ? undefined : readFileSync(resolve(r.password_file), 'utf8').trim(),
      key_prefix: r.key_prefix,
      timeout: parseDuration(r.timeout),
    };
    if (this.buckets && sameSettings(this.buckets.settings, settings)) return;
    let next: RedisBucketStore;
    try {
      next = new RedisBucketStore(settings, this.log, this.onStoreFailure);
    } catch (err) {
      this.log.error(
        { field: 'server.rate_limits.redis', error: (err as Error).name },
        'rate-limit store: could not make a Redis client; the store in force is kept',
      );
      return;
    }
    this.close();
    this.buckets = next;
    this.evidence = new SharedEvidence(settings, this.log, this.onEvidence);
    this.usage = new RedisUsageBooks(settings, this.log);
  }

  /** Tell the other replicas what this one's requests learnt (nothing without Redis). */
  publish(e: Evidence): void {
    this.evidence?.publish(e);
  }

  close(): void {
    this.buckets?.close();
    this.buckets = null;
    this.evidence?.close();
    this.evidence = null;
    this.usage?.close();
    this.usage = null;
  }
}

const sameSettings = (a: RedisSettings, b: RedisSettings) =>
  a.url === b.url && a.password === b.password && a.key_prefix === b.key_prefix && a.timeout === b.timeout;
