import { describe, expect, it } from 'vitest';
import { CircuitBreaker, type BreakerSettings } from '../../../engine/backends/breaker.js';

/** A breaker on a hand-moved clock and a scripted random source (0.5 = no jitter effect). */
function breaker(settings: Partial<BreakerSettings> = {}, random: () => number = () => 0.5) {
  let now = 1_000_000;
  const b = new CircuitBreaker({ healthFailures: 3, proxyFailures: 5, initialOpenMs: 1_000, maxOpenMs: 30_000, jitter: 0, ...settings }, () => now, random);
  return { b, advance: (ms: number) => (now += ms), now: () => now };
}

const trip = (b: CircuitBreaker) => {
  for (let i = 0; i < 5; i++) b.failure(b.admit()!);
};

/** How much longer the breaker stays Open. */
function openFor(b: CircuitBreaker, now: () => number): number {
  return b.openUntil - now();
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

  it('does not close a breaker opened by proxy failures at a passing health check: only a test request that succeeds does', () => {
    const { b, advance } = breaker();
    trip(b);
    expect(b.openedBy).toBe('proxy');
    b.healthSuccess();
    expect(b.state).toBe('open');
    expect(b.admit()).toBeNull();
    advance(1_000);
    const probe = b.admit()!;
    expect(probe.probe).toBe(true);
    b.healthSuccess();
    expect(b.admit()).toBeNull();
    b.success(probe);
    expect(b.state).toBe('closed');
    expect(b.openings).toBe(0);
  });

  it('a passing health check brings a long test wait forward to the initial period after the opening, never sooner', () => {
    const { b, advance, now } = breaker();
    trip(b);
    // Grow the period: 1 s, 2 s, 4 s, 8 s.
    for (let i = 0; i < 3; i++) {
      advance(openFor(b, now));
      b.failure(b.admit()!);
    }
    expect(openFor(b, now)).toBe(8_000);
    advance(200);
    b.healthSuccess();
    expect(openFor(b, now)).toBe(800);
    advance(800);
    expect(b.state).toBe('half-open');
    // A check just after a failed test changes nothing: the flapping backend waits a second.
    b.failure(b.admit()!);
    b.healthSuccess();
    expect(openFor(b, now)).toBe(1_000);
  });

  it('admits exactly one test request once its period is over; its success closes the breaker', () => {
    const { b, advance } = breaker();
    trip(b);
    advance(999);
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

  it('doubles the open period with each failed test request, up to open_timeout', () => {
    const { b, advance, now } = breaker();
    trip(b);
    const periods: number[] = [];
    for (let i = 0; i < 8; i++) {
      periods.push(openFor(b, now));
      expect(b.openings).toBe(i + 1);
      advance(periods[i] - 1);
      expect(b.admit()).toBeNull();
      advance(1);
      b.failure(b.admit()!);
    }
    expect(periods).toEqual([1_000, 2_000, 4_000, 8_000, 16_000, 30_000, 30_000, 30_000]);
  });

  it('starts again from the initial period after a close', () => {
    const { b, advance, now } = breaker();
    trip(b);
    advance(1_000);
    b.failure(b.admit()!);
    expect(openFor(b, now)).toBe(2_000);
    advance(2_000);
    b.success(b.admit()!);
    expect(b.openings).toBe(0);
    trip(b);
    expect(openFor(b, now)).toBe(1_000);
    for (let i = 0; i < 3; i++) b.healthFailure();
    advance(1_000);
    b.success(b.admit()!);
    for (let i = 0; i < 3; i++) b.healthFailure();
    expect(b.openedBy).toBe('health');
    b.healthSuccess();
    trip(b);
    expect(openFor(b, now)).toBe(1_000);
  });

  it('jitters each period within [1 - jitter, 1 + jitter], never above open_timeout', () => {
    for (const [random, first, capped] of [
      [0, 800, 24_000],
      [0.999999, 1_200, 30_000],
      [0.25, 900, 27_000],
    ] as const) {
      const { b, advance, now } = breaker({ jitter: 0.2 }, () => random);
      trip(b);
      expect(openFor(b, now)).toBeCloseTo(first, 0);
      for (let i = 0; i < 7; i++) {
        advance(openFor(b, now));
        b.failure(b.admit()!);
      }
      expect(b.openings).toBe(8);
      expect(openFor(b, now)).toBeCloseTo(capped, 0);
    }
  });

  it('admits nobody while Open, however many requests come one at a time: the test waits for its time', () => {
    const { b, advance } = breaker();
    trip(b);
    for (let i = 0; i < 20; i++) {
      expect(b.admit()).toBeNull();
      advance(10);
    }
    expect(b.nextTestAt).toBe(b.openUntil);
  });

  it('says when the next test request goes: the end of the open period, or about an initial period while one is out', () => {
    const { b, advance, now } = breaker();
    trip(b);
    expect(b.nextTestAt - now()).toBe(1_000);
    advance(1_000);
    const probe = b.admit()!;
    expect(b.nextTestAt - now()).toBe(1_000);
    b.failure(probe);
    expect(b.nextTestAt - now()).toBe(2_000);
  });

  it('gives the test back when its client left: the next request tests instead', () => {
    const { b, advance } = breaker();
    trip(b);
    advance(1_000);
    b.release(b.admit()!);
    expect(b.admit()).toEqual({ probe: true });
  });

  it('lets another request test when the test request was abandoned by its client', () => {
    const { b, advance } = breaker();
    trip(b);
    advance(1_000);
    b.release(b.admit()!);
    expect(b.admit()!.probe).toBe(true);
  });

  it('ignores late results of requests admitted before it opened', () => {
    const { b } = breaker();
    const early = b.admit()!;
    trip(b);
    b.success(early);
    expect(b.state).toBe('open');
  });

  it('keeps the current period across a reload and uses the new settings from the next opening', () => {
    const { b, advance, now } = breaker();
    trip(b);
    b.configure({ healthFailures: 3, proxyFailures: 5, initialOpenMs: 5_000, maxOpenMs: 60_000, jitter: 0 });
    expect(openFor(b, now)).toBe(1_000);
    advance(1_000);
    b.failure(b.admit()!);
    expect(openFor(b, now)).toBe(10_000);
  });

  it('a last-resort request is its test request, whatever is left of the open period; one at a time, an initial period after one failed', () => {
    const { b, advance, now } = breaker();
    trip(b);
    for (let i = 0; i < 4; i++) {
      advance(openFor(b, now));
      b.failure(b.admit()!);
    }
    expect(openFor(b, now)).toBe(16_000);
    const ticket = b.admitLastResort()!;
    expect(ticket.probe).toBe(true);
    expect([b.testing, b.admitLastResort(), b.admit()]).toEqual([true, null, null]);
    // Its failure reopens the breaker (nothing else changes for a request), and the next last
    // resort waits an initial period from then (a backend failing fast is not tried at the
    // clients' rate); its success closes the breaker.
    b.failure(ticket);
    expect([b.state, b.testing, b.admitLastResort(), b.lastResortAt - now()]).toEqual(['open', false, null, 1000]);
    advance(999);
    expect(b.admitLastResort()).toBeNull();
    advance(1);
    b.success(b.admitLastResort()!);
    expect([b.state, b.testing]).toEqual(['closed', false]);
    // On a closed breaker too, one at a time; a client that left frees it.
    const again = b.admitLastResort()!;
    expect(b.admitLastResort()).toBeNull();
    b.release(again);
    expect(b.testing).toBe(false);
  });

  describe('an opening for the requests that failed only (their answers opened it, health passing)', () => {
    const answer = (b: CircuitBreaker, digest: string) => b.failure(b.scoped ? b.admitFor(digest)! : b.admit()!, digest);

    it("one client's request failing five times refuses that request only; another's success closes it", () => {
      const { b } = breaker();
      const opened: number[] = [];
      let told = 0;
      b.onProxyOpen = (ms) => opened.push(ms);
      b.onOpened = () => told++;
      for (let i = 0; i < 5; i++) answer(b, 'tool-call');
      expect([b.state, b.scoped, b.scopeSize, b.admits]).toEqual(['open', true, 1, true]);
      // Neither the other workers and replicas nor the attempts under way are told: it is not everyone's.
      expect([opened, told]).toEqual([[], 0]);
      expect(b.admitFor('tool-call')).toBeNull();
      const other = b.admitFor('plain')!;
      expect(other).toEqual({ probe: false });
      b.success(other);
      expect([b.state, b.scoped]).toEqual(['closed', false]);
    });

    it("a third request failing, or a failure that is not an answer, makes the opening everyone's", () => {
      for (const last of ['third', undefined]) {
        const { b } = breaker();
        let told = 0;
        b.onOpened = () => told++;
        for (let i = 0; i < 5; i++) answer(b, i % 2 ? 'a' : 'b');
        expect(b.scopeSize).toBe(2);
        b.failure(b.admitFor('c')!, last);
        expect([b.state, b.scoped, b.admits, b.admit(), told]).toEqual(['open', false, false, null, 1]);
      }
    });

    it('opens for everyone when the run held a gateway failure, more than two requests, or failing health checks', () => {
      const gateway = breaker().b;
      for (let i = 0; i < 4; i++) answer(gateway, 'x');
      gateway.failure(gateway.admit()!);
      const many = breaker().b;
      for (let i = 0; i < 5; i++) answer(many, `request ${i % 3}`);
      const unhealthy = breaker().b;
      unhealthy.healthFailure();
      for (let i = 0; i < 5; i++) answer(unhealthy, 'x');
      for (const b of [gateway, many, unhealthy]) expect([b.state, b.scoped]).toEqual(['open', false]);
    });

    it('after its period, others still go through and one refused request at a time is the test; failing it opens for it alone again', () => {
      const { b, advance } = breaker();
      for (let i = 0; i < 5; i++) answer(b, 'x');
      advance(1_000);
      expect([b.state, b.admitFor('plain')]).toEqual(['half-open', { probe: false }]);
      const probe = b.admitFor('x')!;
      expect([probe.probe, b.admitFor('x'), b.admitFor('plain')]).toEqual([true, null, { probe: false }]);
      b.failure(probe, 'x');
      expect([b.state, b.scoped, b.openings]).toEqual(['open', true, 2]);
    });

    it("another worker's answers count as answers (the host passes their digests); a failing health check makes it everyone's", () => {
      const { b } = breaker();
      for (let i = 0; i < 5; i++) b.countElsewhere(true, 'x');
      expect([b.state, b.scoped]).toEqual(['open', true]);
      let told = 0;
      b.onOpened = () => told++;
      b.healthFailure();
      expect([b.scoped, b.admits, told]).toEqual([false, false, 1]);
    });
  });
});
