// The token bucket's arithmetic, shared by the in-memory store (rate-buckets.ts) and the Redis
// one (redis-buckets.ts): what a rate is, and what a bucket holding so many units tells a client.

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

/** One bucket a request takes a token from: its scope, key and rate. */
export interface SharedTake {
  scope: string;
  key: string;
  rate: Rate;
}

/** A take from several buckets, all or none: each bucket as the take left it, and the first that
 *  refused (-1: none). `leased`: tokens of each lent to the asking worker besides (a host's
 *  answer: sharing/leased-buckets.ts). */
export interface TakeAnswer {
  takes: Take[];
  refused: number;
  leased?: number[];
}

/** Tokens are counted in units of 1/60000: a minute's refill adds exactly perMinute tokens per
 *  millisecond of units, so whole-millisecond clocks give exact arithmetic (no float drift). */
export const UNIT = 60_000;

/** Seconds for `units` more to arrive, rounded up. */
const secondsFor = (units: number, perMs: number) => Math.ceil(units / perMs / 1000);

/** What a bucket holding `units` (of `capacity`, refilling `perMs` units a millisecond) tells. */
export function reportOf(units: number, capacity: number, perMs: number, allowed: boolean): Take {
  return {
    allowed,
    limit: perMs,
    remaining: Math.floor(units / UNIT),
    retryAfterS: units >= UNIT ? 0 : Math.max(1, secondsFor(UNIT - units, perMs)),
    resetS: secondsFor(capacity - units, perMs),
  };
}
