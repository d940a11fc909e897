// The fleet retry budget: a share of recent requests plus a floor per second, over a sliding window.
import { describe, expect, it } from 'vitest';
import { RetryBudget } from '../../../engine/backends/retry-budget.js';

function budget(ratio: number, minPerSecond: number, windowMs = 10_000) {
  let now = 1_000_000;
  const b = new RetryBudget({ ratio, minPerSecond, windowMs }, () => now);
  return { b, advance: (ms: number) => (now += ms) };
}

const takeAll = (b: RetryBudget, max = 1000) => {
  let n = 0;
  while (n < max && b.tryRetry()) n++;
  return n;
};

describe('fleet retry budget', () => {
  it('allows ratio × requests of the window plus the floor, then refuses and counts the refusals', () => {
    const { b } = budget(0.2, 0);
    for (let i = 0; i < 100; i++) b.deposit();
    expect(takeAll(b)).toBe(20);
    expect(b.canRetry()).toBe(false);
    expect(b.tryRetry()).toBe(false);
    expect(b.exhausted).toBe(2); // the one takeAll stopped at, and this one
    expect(b.taken).toBe(20);
  });

  it('keeps min_per_second × window available with no traffic at all', () => {
    const { b } = budget(0.2, 5);
    expect(takeAll(b)).toBe(50);
  });

  it('forgets deposits and retries that left the window', () => {
    const { b, advance } = budget(0.5, 0, 3000);
    for (let i = 0; i < 10; i++) b.deposit();
    expect(takeAll(b)).toBe(5);
    advance(3000); // the window has moved past both
    expect(b.canRetry()).toBe(false);
    for (let i = 0; i < 4; i++) b.deposit();
    expect(takeAll(b)).toBe(2);
  });

  it('takes a new window length on reload', () => {
    const { b } = budget(1, 0, 2000);
    b.configure({ ratio: 1, minPerSecond: 1, windowMs: 5000 });
    expect(takeAll(b)).toBe(5);
  });
});
