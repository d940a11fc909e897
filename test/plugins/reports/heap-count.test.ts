// The heap-object count behind /internal/process: taken only when asked, at most once per
// HEAP_COUNT_MAX_AGE_MS, reported with its age.
import { describe, expect, it } from 'vitest';
import { HEAP_COUNT_MAX_AGE_MS, HeapObjectCount } from '../../../plugins/reports/heap-count.js';

function counter() {
  let now = 1_000_000;
  let taken = 0;
  const heap = new HeapObjectCount(
    () => 5000 + ++taken,
    () => now,
  );
  return { heap, taken: () => taken, advance: (ms: number) => (now += ms) };
}

describe('HeapObjectCount', () => {
  it('is 0 with no age until someone asks for a count; reading does not count', () => {
    const c = counter();
    expect(c.heap.read(false)).toEqual({ count: 0, ageSeconds: null });
    expect(c.taken()).toBe(0);
  });

  it('counts when first asked, then serves that count with its age until it is a minute old', () => {
    const c = counter();
    expect(c.heap.read(true)).toEqual({ count: 5001, ageSeconds: 0 });
    c.advance(HEAP_COUNT_MAX_AGE_MS - 1);
    expect(c.heap.read(true)).toEqual({ count: 5001, ageSeconds: Math.floor((HEAP_COUNT_MAX_AGE_MS - 1) / 1000) });
    expect(c.taken()).toBe(1);
    c.advance(1);
    expect(c.heap.read(true)).toEqual({ count: 5002, ageSeconds: 0 });
    expect(c.taken()).toBe(2);
  });

  it('never counts for a reader that does not ask, however old the count', () => {
    const c = counter();
    c.heap.read(true);
    c.advance(10 * HEAP_COUNT_MAX_AGE_MS);
    expect(c.heap.read(false)).toEqual({ count: 5001, ageSeconds: (10 * HEAP_COUNT_MAX_AGE_MS) / 1000 });
    expect(c.taken()).toBe(1);
  });

  it('never reports a negative age for a count that took a while', () => {
    let now = 1_000_000;
    const slow = new HeapObjectCount(
      () => {
        now += 1500;
        return 42;
      },
      () => now,
    );
    expect(slow.read(true)).toEqual({ count: 42, ageSeconds: 0 });
  });
});
