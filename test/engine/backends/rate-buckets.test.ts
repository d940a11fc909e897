// The token-bucket store behind the rate limits: exact refill with a whole-millisecond clock, and
// a bounded number of buckets however many keys arrive.
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { MemoryBucketStore, RateBuckets } from '../../../engine/backends/rate-buckets.js';
import { Fleet } from '../../../engine/backends/sharing/fleet.js';
import type { RedisBucketStore } from '../../../engine/backends/sharing/redis-buckets.js';

describe('MemoryBucketStore', () => {
  it('holds burst tokens, refills perMinute a minute, and reports what the headers say', () => {
    let now = 0;
    const store = new MemoryBucketStore(100, () => now);
    const rate = { perMinute: 7, burst: 3 };
    expect([1, 2, 3].map(() => store.take('a', rate).remaining)).toEqual([2, 1, 0]);
    expect(store.take('a', rate)).toEqual({ allowed: false, limit: 7, remaining: 0, retryAfterS: 9, resetS: 26 });
    // 7 a minute: a token every 60000/7 ms — exactly, with no float drift over many small steps.
    for (let i = 0; i < 8571; i++) now++;
    expect(store.take('a', rate).allowed).toBe(false);
    now += 1;
    expect(store.take('a', rate).allowed).toBe(true);
    store.refund('a');
    expect(store.peek('a', rate).remaining).toBe(1);
    // burst 0 is taken as 1.
    expect(store.take('b', { perMinute: 60, burst: 0 }).allowed).toBe(true);
    expect(store.take('b', { perMinute: 60, burst: 0 }).allowed).toBe(false);
  });

  it('never holds more than maxKeys buckets, dropping refilled ones before active ones', () => {
    let now = 0;
    const store = new MemoryBucketStore(1000, () => now);
    const rate = { perMinute: 60, burst: 2 };
    store.take('hot', rate);
    store.take('hot', rate);
    let most = 0;
    for (let i = 0; i < 100_000; i++) {
      store.take(`10.${i >> 16}.${(i >> 8) & 255}.${i & 255}`, rate);
      most = Math.max(most, store.size);
      // Every client but "hot" takes one token and leaves: refilled one second later.
      if (i % 500 === 0) now += 1000;
      if (i % 500 === 0) {
        store.take('hot', rate);
        store.take('hot', rate);
      }
    }
    expect(most).toBe(1000);
    // "hot" is never full, so the sweeps dropped the refilled ones and kept it: still limited.
    expect(store.take('hot', rate).allowed).toBe(false);
  });
});

describe('RateBuckets: where a step takes its tokens', () => {
  const limits = (store: 'memory' | 'redis') => ({ store }) as never;
  const rate = { perMinute: 60, burst: 2 };

  it("in memory: answered at once, all or none, a plugin's own scope made on first use", () => {
    const buckets = new RateBuckets(
      100,
      () => 0,
      null,
      new Fleet(
        pino({ level: 'silent' }),
        () => undefined,
        () => undefined,
      ),
    );
    const taker = buckets.takerFor('api-key', limits('memory'));
    if (!taker.local) throw new Error('a memory taker was expected');
    const takes = [
      { scope: 'api-key', key: 'k1', rate },
      { scope: 'global', key: '', rate: { perMinute: 60, burst: 1 } },
    ];
    expect(taker.take(takes)).toMatchObject({ refused: -1, takes: [{ remaining: 1 }, { remaining: 0 }] });
    // The global bucket refuses: the key's token is given back.
    expect(taker.take(takes)).toMatchObject({ refused: 1 });
    expect(buckets.takeAll([{ scope: 'api-key', key: 'k1', rate }]).takes[0].remaining).toBe(0);
  });

  it('a step that takes in memory stays so when a reload shares the limits meanwhile; shared ones pick the store at each take', async () => {
    const fleet = new Fleet(
      pino({ level: 'silent' }),
      () => undefined,
      () => undefined,
    );
    const buckets = new RateBuckets(100, () => 0, null, fleet);
    const local = buckets.takerFor('ip', limits('memory'));
    const shared = buckets.takerFor('ip', limits('redis'));
    expect([local.local, shared.local, buckets.takerFor('health', limits('redis')).local]).toEqual([true, false, true]);
    const takes = [{ scope: 'ip', key: '10.0.0.1', rate }];
    // No Redis yet (a reload not applied): the shared taker falls back to memory.
    expect(await shared.take(takes)).toMatchObject({ refused: -1 });
    const redis = { take: async () => ({ takes: [], refused: -1 }) } as unknown as RedisBucketStore;
    fleet.buckets = redis;
    if (!local.local) throw new Error('a memory taker was expected');
    const answer = local.take(takes);
    // Taken in memory, at once: the burst's second token.
    expect(answer).toMatchObject({ refused: -1, takes: [{ remaining: 0 }] });
    expect(await shared.take(takes)).toEqual({ takes: [], refused: -1 });
    fleet.buckets = null;
  });
});
