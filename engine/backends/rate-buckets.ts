// Token buckets for the rate limits (server.rate_limits): each key (the gateway, a client address,
// an endpoint) has a bucket of `burst` tokens that refills at `perMinute` tokens a minute; a
// request takes one or is refused. The store sits behind a small interface so that a store shared
// by several gateway processes can replace the in-memory one; the in-memory one is bounded: an
// attacker rotating addresses cannot grow it past `maxKeys`.

import type { Logger } from 'pino';
import type { GatewayConfig } from '../core/config.js';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { parseDuration } from '../core/duration.js';
import { RedisBucketStore, type RedisSettings, type SharedTake } from './redis-buckets.js';
import { reportOf, UNIT, type Rate, type Take } from './token-bucket.js';
import { LEASE_MAX } from './leased-buckets.js';

export type { Rate, Take } from './token-bucket.js';

export interface BucketStore {
  /** Take a token from the key's bucket (a new key starts full). */
  take(key: string, rate: Rate): Take;
  /** Give back a token taken for a request that was not sent after all. */
  refund(key: string): void;
  /** The key's bucket now, without taking a token. */
  peek(key: string, rate: Rate): Take;
  /** Buckets held now. */
  readonly size: number;
}


interface Bucket {
  /** Tokens × UNIT. */
  units: number;
  /** When `units` was last brought up to date (clock milliseconds). */
  at: number;
  /** Its capacity (× UNIT) and refill (units per millisecond = requests per minute) at the last
   *  take: a bucket is dropped only once it is full. */
  capacity: number;
  perMs: number;
}

const capacityOf = (rate: Rate) => Math.max(1, rate.burst) * UNIT;

/** The in-memory store. `maxKeys` bounds the buckets held: when it is reached, buckets that have
 *  refilled (the same as a fresh one, so dropping them changes nothing) are dropped first, oldest
 *  first; if that frees too little, the oldest buckets go (their clients start afresh: lenient,
 *  never stricter). Each sweep frees a tenth of the store, so its cost is constant per new key. */
export class MemoryBucketStore implements BucketStore {
  private readonly buckets = new Map<string, Bucket>();

  constructor(public maxKeys: number, private readonly clock: () => number) {}

  get size(): number {
    return this.buckets.size;
  }

  take(key: string, rate: Rate): Take {
    const b = this.current(key, rate, this.clock(), true);
    const allowed = b.units >= UNIT;
    if (allowed) b.units -= UNIT;
    return report(b, allowed);
  }

  refund(key: string, tokens = 1): void {
    const b = this.buckets.get(key);
    if (b) b.units = Math.min(b.capacity, b.units + tokens * UNIT);
  }

  /** Take up to `share` of the whole tokens the key's bucket holds now (at most `max`), after a
   *  take: lent to a worker (leased-buckets.ts). Returns how many were taken. */
  lend(key: string, share: number, max: number): number {
    const b = this.buckets.get(key);
    if (!b) return 0;
    const n = Math.min(max, Math.floor(Math.floor(b.units / UNIT) / share));
    b.units -= n * UNIT;
    return n;
  }

  peek(key: string, rate: Rate): Take {
    const b = this.current(key, rate, this.clock(), false);
    return report(b, b.units >= UNIT);
  }

  /** The key's bucket refilled up to `now` (created full when new; stored only when `keep`). */
  private current(key: string, rate: Rate, now: number, keep: boolean): Bucket {
    const capacity = capacityOf(rate);
    const perMs = rate.perMinute;
    let b = this.buckets.get(key);
    if (!b) {
      b = { units: capacity, at: now, capacity, perMs };
      if (keep) {
        if (this.buckets.size >= this.maxKeys) this.sweep(now);
        this.buckets.set(key, b);
      }
      return b;
    }
    b.units = Math.min(capacity, b.units + Math.max(0, now - b.at) * perMs);
    b.at = now;
    b.capacity = capacity;
    b.perMs = perMs;
    return b;
  }

  private sweep(now: number): void {
    const target = Math.max(1, Math.ceil(this.maxKeys / 10));
    let freed = 0;
    for (const [key, b] of this.buckets) {
      if (b.units + Math.max(0, now - b.at) * b.perMs >= b.capacity) {
        this.buckets.delete(key);
        if (++freed >= target) return;
      }
    }
    for (const key of this.buckets.keys()) {
      this.buckets.delete(key);
      if (++freed >= target) return;
    }
  }
}

const report = (b: Bucket, allowed: boolean): Take => reportOf(b.units, b.capacity, b.perMs, allowed);

/** Buckets several processes share (Redis for replicas, the host for its workers): a token from
 *  each, all or none, in one round trip. */
export interface SharedBuckets {
  take(takes: readonly SharedTake[]): Promise<{ takes: Take[]; refused: number }>;
}

export type LimitScope = 'global' | 'ip' | 'health' | 'internal' | 'endpoint';

/** The gateway's buckets, one store per scope; they outlive compiled graphs (a reload keeps them).
 *  `shared`: the Redis store every replica shares for the global and per-address scopes, when
 *  server.rate_limits.store is redis. */
export class RateBuckets {
  readonly stores: Readonly<Record<LimitScope, MemoryBucketStore>>;
  shared: RedisBucketStore | null = null;

  /** `host`: a worker's buckets are its host's (host-link.ts); the global and per-address scopes
   *  take from there (the health scope stays per process, like with Redis). */
  constructor(maxClients: number, clock: () => number, private readonly log: Logger, private readonly onStoreFailure: () => void = () => undefined, readonly host: SharedBuckets | null = null) {
    const store = (max: number) => new MemoryBucketStore(max, clock);
    this.stores = { global: store(1), ip: store(maxClients), health: store(maxClients), internal: store(maxClients), endpoint: store(Number.MAX_SAFE_INTEGER) };
  }

  /** A reload may change the bound (a smaller one takes effect at the next new key) and the store:
   *  a new Redis client is made before the old one is closed, and one that cannot be made leaves
   *  the store as it was (the config's URL and password file were checked when it loaded). */
  configure(limits: GatewayConfig['server']['rate_limits']): void {
    for (const scope of ['ip', 'health', 'internal'] as const) this.stores[scope].maxKeys = limits.max_tracked_clients;
    if (limits.store !== 'redis') {
      this.close();
      return;
    }
    const r = limits.redis;
    const settings: RedisSettings = { url: r.url, password: r.password_file === undefined ? undefined : readFileSync(resolve(r.password_file), 'utf8').trim(), key_prefix: r.key_prefix, timeout: parseDuration(r.timeout) };
    if (this.shared && sameSettings(this.shared.settings, settings)) return;
    let next: RedisBucketStore;
    try {
      next = new RedisBucketStore(settings, this.log, this.onStoreFailure);
    } catch (err) {
      this.log.error({ field: 'server.rate_limits.redis', error: (err as Error).name }, 'rate-limit store: could not make a Redis client; the store in force is kept');
      return;
    }
    this.shared?.close();
    this.shared = next;
  }

  close(): void {
    this.shared?.close();
    this.shared = null;
  }

  /** A token from each bucket, all or none (a host answering its workers: host-state.ts): the
   *  buckets as the takes left them, the first that refused (-1: none), and with `share` the
   *  tokens of each lent besides (1/share of what is left, at most LEASE_MAX). */
  takeAll(takes: readonly SharedTake[], share = 0): { takes: Take[]; refused: number; leased?: number[] } {
    const out: Take[] = [];
    for (let i = 0; i < takes.length; i++) {
      const t = takes[i];
      const taken = this.stores[t.scope as LimitScope].take(t.key, t.rate);
      out.push(taken);
      if (!taken.allowed) {
        for (let j = 0; j < i; j++) this.stores[takes[j].scope as LimitScope].refund(takes[j].key);
        return { takes: out, refused: i };
      }
    }
    if (share <= 0) return { takes: out, refused: -1 };
    return { takes: out, refused: -1, leased: takes.map((t) => this.stores[t.scope as LimitScope].lend(t.key, share, LEASE_MAX)) };
  }

  /** Tokens a worker was lent and did not use. */
  giveBack(scope: string, key: string, tokens: number): void {
    this.stores[scope as LimitScope]?.refund(key, tokens);
  }
}

/** An endpoint's per-endpoint limit, for the attempt loop (Endpoint.rateGate). */
export class EndpointRateGate {
  constructor(private readonly store: BucketStore, private readonly key: string, readonly rate: Rate) {}

  /** True when the endpoint may take one more request now (a token was taken). */
  tryTake(): boolean {
    return this.store.take(this.key, this.rate).allowed;
  }

  refund(): void {
    this.store.refund(this.key);
  }

  peek(): Take {
    return this.store.peek(this.key, this.rate);
  }
}

const sameSettings = (a: RedisSettings, b: RedisSettings) => a.url === b.url && a.password === b.password && a.key_prefix === b.key_prefix && a.timeout === b.timeout;

