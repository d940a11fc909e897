// Token buckets for the rate limits (server.rate_limits): each key (the gateway, a client address,
// an endpoint) has a bucket of `burst` tokens that refills at `perMinute` tokens a minute; a
// request takes one or is refused. Where a scope's buckets are kept is chosen once, where the
// backends' state is built (sharing/scopes.ts): this process's memory, the host's (a worker asks
// it: sharing/leased-buckets.ts), or the fleet's Redis (sharing/fleet.ts); `take()` picks the
// store. The in-memory store is bounded: an attacker rotating addresses cannot grow it past `maxKeys`.
import type { GatewayConfig } from '../core/config.js';
import type { Fleet } from './sharing/fleet.js';
import { LEASE_MAX } from './sharing/leased-buckets.js';
import { reportOf, UNIT, type Rate, type SharedTake, type Take, type TakeAnswer } from './token-bucket.js';

export type { Rate, SharedTake, Take, TakeAnswer } from './token-bucket.js';

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

  constructor(
    public maxKeys: number,
    private readonly clock: () => number,
  ) {}

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
   *  take: lent to a worker (sharing/leased-buckets.ts). Returns how many were taken. */
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

/** Buckets another process keeps (the host, for its workers; Redis, for the replicas): a token
 *  from each, all or none, in one round trip. */
export interface SharedBuckets {
  take(takes: readonly SharedTake[]): Promise<TakeAnswer>;
}

/** The scopes of the gateway's own limits. A plugin may take from a scope of its own: created on
 *  first use, bounded like the per-address ones (server.rate_limits.max_tracked_clients). */
export type LimitScope = 'global' | 'ip' | 'health' | 'internal' | 'endpoint';

/** How a step takes tokens, chosen once when it is applied (RateBuckets.takerFor): from this
 *  process's memory, answered at once; or from a store shared with other processes, a round trip
 *  each. Either way a token from each bucket, all or none. */
export type Taker =
  | { readonly local: true; take(takes: readonly SharedTake[]): TakeAnswer }
  | { readonly local: false; take(takes: readonly SharedTake[]): Promise<TakeAnswer> };

/** The gateway's buckets, one in-memory store per scope; they outlive compiled graphs (a reload
 *  keeps them). `host`: the host's buckets when this process is one of its workers; `fleet`: the
 *  replicas' Redis, when server.rate_limits.store is redis. */
export class RateBuckets {
  readonly stores: Readonly<Record<LimitScope, MemoryBucketStore>>;
  /** Every scope's store by name: the gateway's own and the plugins'. */
  private readonly byScope = new Map<string, MemoryBucketStore>();
  private maxClients: number;
  private readonly local: Taker = { local: true, take: (takes) => this.takeAll(takes) };
  private readonly shared: Taker = {
    local: false,
    take: (takes) => {
      // Picked at each take: a reload may have switched the sharing off meanwhile (memory then).
      const store = this.fleet.buckets ?? this.host;
      return store ? store.take(takes) : Promise.resolve(this.takeAll(takes));
    },
  };

  constructor(
    maxClients: number,
    private readonly clock: () => number,
    private readonly host: SharedBuckets | null,
    private readonly fleet: Fleet,
  ) {
    this.maxClients = maxClients;
    const store = (max: number) => new MemoryBucketStore(max, clock);
    this.stores = { global: store(1), ip: store(maxClients), health: store(maxClients), internal: store(maxClients), endpoint: store(Number.MAX_SAFE_INTEGER) };
    for (const [scope, s] of Object.entries(this.stores)) this.byScope.set(scope, s);
  }

  /** A reload may change the bound of the per-client scopes: a smaller one takes effect at the next new key. */
  configure(limits: GatewayConfig['server']['rate_limits']): void {
    this.maxClients = limits.max_tracked_clients;
    for (const [scope, s] of this.byScope) if (scope !== 'global' && scope !== 'endpoint') s.maxKeys = limits.max_tracked_clients;
  }

  /** How a step takes tokens of `scope` (and the global scope's) under these limits: from this
   *  process's memory when that is where the scope is kept — the health scope always, since a slow
   *  store must never make a liveness or readiness probe time out — else from where the limits are
   *  shared: the fleet's Redis, or a worker's host (failing open when it cannot answer). */
  takerFor(scope: string, limits: GatewayConfig['server']['rate_limits']): Taker {
    return scope === 'health' || (limits.store !== 'redis' && this.host === null) ? this.local : this.shared;
  }

  /** A token from each in-memory bucket, all or none (also a host answering its workers:
   *  sharing/host-state.ts); with `share`, the tokens of each lent besides (1/share of what is
   *  left, at most LEASE_MAX). */
  takeAll(takes: readonly SharedTake[], share = 0): TakeAnswer {
    const out: Take[] = [];
    for (let i = 0; i < takes.length; i++) {
      const t = takes[i];
      const taken = this.storeOf(t.scope).take(t.key, t.rate);
      out.push(taken);
      if (!taken.allowed) {
        for (let j = 0; j < i; j++) this.storeOf(takes[j].scope).refund(takes[j].key);
        return { takes: out, refused: i };
      }
    }
    if (share <= 0) return { takes: out, refused: -1 };
    return { takes: out, refused: -1, leased: takes.map((t) => this.storeOf(t.scope).lend(t.key, share, LEASE_MAX)) };
  }

  /** Tokens a worker was lent and did not use. */
  giveBack(scope: string, key: string, tokens: number): void {
    this.byScope.get(scope)?.refund(key, tokens);
  }

  private storeOf(scope: string): MemoryBucketStore {
    let store = this.byScope.get(scope);
    if (store === undefined) this.byScope.set(scope, (store = new MemoryBucketStore(this.maxClients, this.clock)));
    return store;
  }
}

/** An endpoint's per-endpoint limit, for the attempt loop (Endpoint.rateGate). */
export class EndpointRateGate {
  constructor(
    private readonly store: BucketStore,
    private readonly key: string,
    readonly rate: Rate,
  ) {}

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
