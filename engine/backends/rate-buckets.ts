// Token buckets for the rate limits (server.rate_limits): each key (the gateway, a client address,
// an endpoint) has a bucket of `burst` tokens that refills at `perMinute` tokens a minute; a
// request takes one or is refused. The store sits behind a small interface so that a store shared
// by several gateway processes can replace the in-memory one; the in-memory one is bounded: an
// attacker rotating addresses cannot grow it past `maxKeys`.

export interface Rate {
  /** Tokens added per minute (the sustained rate); above 0. */
  perMinute: number;
  /** The bucket's capacity: requests that may arrive at once after a quiet spell (at least 1). */
  burst: number;
}

/** A bucket as one take (or peek) left it: what the X-RateLimit-* headers and Retry-After say. */
export interface Take {
  allowed: boolean;
  /** The rate's requests per minute. */
  limit: number;
  /** Whole tokens left. */
  remaining: number;
  /** Seconds until the next token (0 while one is there). */
  retryAfterS: number;
  /** Seconds until the bucket is full again. */
  resetS: number;
}

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

/** Tokens are counted in units of 1/60000: a minute's refill adds exactly perMinute tokens per
 *  millisecond of units, so whole-millisecond clocks give exact arithmetic (no float drift). */
const UNIT = 60_000;

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

  refund(key: string): void {
    const b = this.buckets.get(key);
    if (b) b.units = Math.min(b.capacity, b.units + UNIT);
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

/** Seconds for `units` more to arrive, rounded up. */
const secondsFor = (units: number, perMs: number) => Math.ceil(units / perMs / 1000);

function report(b: Bucket, allowed: boolean): Take {
  return {
    allowed,
    limit: b.perMs,
    remaining: Math.floor(b.units / UNIT),
    retryAfterS: b.units >= UNIT ? 0 : Math.max(1, secondsFor(UNIT - b.units, b.perMs)),
    resetS: secondsFor(b.capacity - b.units, b.perMs),
  };
}

export type LimitScope = 'global' | 'ip' | 'health' | 'internal' | 'endpoint';

/** The gateway's buckets, one store per scope; they outlive compiled graphs (a reload keeps them). */
export class RateBuckets {
  readonly stores: Readonly<Record<LimitScope, MemoryBucketStore>>;

  constructor(maxClients: number, clock: () => number) {
    const store = (max: number) => new MemoryBucketStore(max, clock);
    this.stores = { global: store(1), ip: store(maxClients), health: store(maxClients), internal: store(maxClients), endpoint: store(Number.MAX_SAFE_INTEGER) };
  }

  /** A reload may change the bound; a smaller one takes effect at the next new key. */
  configure(maxClients: number): void {
    for (const scope of ['ip', 'health', 'internal'] as const) this.stores[scope].maxKeys = maxClients;
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
