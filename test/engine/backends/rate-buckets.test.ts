// The token-bucket store behind the rate limits: exact refill with a whole-millisecond clock, and
// a bounded number of buckets however many keys arrive.
import { describe, expect, it } from 'vitest';
import { MemoryBucketStore } from '../../../engine/backends/rate-buckets.js';

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
