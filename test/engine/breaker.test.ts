import { describe, expect, it } from 'vitest';
import { CircuitBreaker } from '../../engine/backends/breaker.js';

function breaker() {
  let now = 1_000_000;
  const b = new CircuitBreaker({ healthFailures: 3, proxyFailures: 5, openMs: 30_000 }, () => now);
  return { b, advance: (ms: number) => (now += ms) };
}

describe('circuit breaker', () => {
  it('opens after 5 consecutive proxy failures; a success in between starts the count again', () => {
    const { b } = breaker();
    for (let i = 0; i < 4; i++) b.failure(b.admit()!);
    b.success(b.admit()!);
    for (let i = 0; i < 4; i++) b.failure(b.admit()!);
    expect(b.state).toBe('closed');
    b.failure(b.admit()!);
    expect(b.state).toBe('open');
    expect(b.admit()).toBeNull();
  });

  it('opens after 3 consecutive failed health checks, and a passing check closes it', () => {
    const { b } = breaker();
    b.healthFailure();
    b.healthFailure();
    expect(b.state).toBe('closed');
    b.healthFailure();
    expect(b.state).toBe('open');
    b.healthSuccess();
    expect(b.state).toBe('closed');
  });

  it('admits exactly one test request once open for 30 s; its success closes the breaker', () => {
    const { b, advance } = breaker();
    for (let i = 0; i < 5; i++) b.failure(b.admit()!);
    advance(29_999);
    expect(b.admit()).toBeNull();
    advance(1);
    expect(b.state).toBe('half-open');
    const probe = b.admit()!;
    expect(probe.probe).toBe(true);
    expect(Array.from({ length: 50 }, () => b.admit())).toEqual(Array(50).fill(null));
    b.success(probe);
    expect(b.state).toBe('closed');
    expect(b.admit()).toEqual({ probe: false });
  });

  it('reopens for another 30 s when the test request fails', () => {
    const { b, advance } = breaker();
    for (let i = 0; i < 5; i++) b.failure(b.admit()!);
    advance(30_000);
    b.failure(b.admit()!);
    expect(b.state).toBe('open');
    advance(29_000);
    expect(b.admit()).toBeNull();
    advance(1_000);
    expect(b.admit()!.probe).toBe(true);
  });

  it('lets another request test when the test request was abandoned by its client', () => {
    const { b, advance } = breaker();
    for (let i = 0; i < 5; i++) b.failure(b.admit()!);
    advance(30_000);
    b.release(b.admit()!);
    expect(b.admit()!.probe).toBe(true);
  });

  it('keeps a proxy-opened breaker open through passing health checks', () => {
    const { b } = breaker();
    for (let i = 0; i < 5; i++) b.failure(b.admit()!);
    b.healthSuccess();
    expect(b.state).toBe('open');
  });

  it('ignores late results of requests admitted before it opened', () => {
    const { b } = breaker();
    const early = b.admit()!;
    for (let i = 0; i < 5; i++) b.failure(b.admit()!);
    b.success(early);
    expect(b.state).toBe('open');
  });
});
