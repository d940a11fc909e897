// The attempt loop's decisions alone, without I/O: the order a plan is walked in, what may be
// tried again and when, what the fleet's retry budget is charged for, which statuses are held
// back and what they become, and the error when nothing answered.
import { describe, expect, it } from 'vitest';
import type { Endpoint } from '../../../engine/backends/endpoints.js';
import {
  backoff,
  chargesFleet,
  exhaustedError,
  heldVerdict,
  holdsStatus,
  PlanWalk,
  retryDelay,
  warmAlternative,
  type Exhaustion,
  type Step,
} from '../../../engine/routing/decisions.js';
import type { Candidate } from '../../../engine/routing/plan.js';

const ep = (name: string) => ({ name }) as unknown as Endpoint;
/** Candidates named by letter, in groups: [['a', 'b'], ['c']] is a, b for the requested model, c its fallback. */
const plan = (groups: string[][]): Candidate[] =>
  groups.flatMap((names, group) => names.map((n) => ({ endpoint: ep(n), model: undefined, group, why: group ? 'fallback' : 'requested' }) as Candidate));

/** Walk the plan; `fails(step)` says when the tried candidate may go again (null: not again). */
function walk(groups: string[][], fails: (name: string, step: Step) => number | null = () => null): string[] {
  const candidates = plan(groups);
  const w = new PlanWalk(candidates);
  const out: string[] = [];
  for (let step = w.next(); step && out.length < 50; step = w.next()) {
    const name = candidates[step.index].endpoint.name;
    out.push(step.tries ? `${name}${step.tries}` : name);
    const readyAt = fails(name, step);
    if (readyAt !== null) w.retryLater(step, readyAt);
  }
  return out;
}

describe('PlanWalk: the order', () => {
  it('tries each endpoint of the requested model, then each fallback’s, when nothing may be retried', () => {
    expect(walk([['a', 'b'], ['c'], ['d']])).toEqual(['a', 'b', 'c', 'd']);
  });

  it('the requested model once more — its retries, soonest ready first — before the fallback', () => {
    const ready: Record<string, number> = { a: 300, b: 100 };
    expect(walk([['a', 'b'], ['c']], (name) => ready[name] ?? null)).toEqual(['a', 'b', 'b1', 'a1', 'c']);
  });

  it('once more only, while a fallback waits: a retry that fails again goes on to the fallback', () => {
    expect(walk([['a'], ['c']], (name) => (name === 'a' ? 1 : null))).toEqual(['a', 'a1', 'c']);
  });

  it('the last name’s endpoints again and again (the loop stops them at max_retries and the budget)', () => {
    const out = walk([['a']], () => 1);
    expect(out.slice(0, 4)).toEqual(['a', 'a1', 'a2', 'a3']);
    expect(out).toHaveLength(50);
  });

  it('says whether another candidate waits, and stops on demand', () => {
    const w = new PlanWalk(plan([['a', 'b'], ['c']]));
    const a = w.next()!;
    expect(w.waiting).toBe(true);
    expect(w.mayRetry(a)).toBe(true);
    w.next();
    w.next();
    expect(w.waiting).toBe(false);
    const single = new PlanWalk(plan([['a']]));
    const first = single.next()!;
    expect(single.waiting).toBe(false);
    single.retryLater(first, 5);
    expect(single.waiting).toBe(true);
    single.stop();
    expect(single.waiting).toBe(false);
    expect(single.next()).toBeNull();
  });

  it('an empty plan has no step', () => {
    expect(new PlanWalk([]).next()).toBeNull();
  });
});

describe('retryDelay: what another try may fix, and after how long', () => {
  const BACKOFF = 250;
  const BUDGET = 900_000;
  it('a failure status once more: after its Retry-After, else the backoff; never a third time', () => {
    expect(retryDelay({ kind: 'status', retryAfterMs: 2000 }, 1, BACKOFF, BUDGET, 0.5)).toBe(2000);
    expect(retryDelay({ kind: 'status' }, 1, BACKOFF, BUDGET, 0.5)).toBe(BACKOFF);
    expect(retryDelay({ kind: 'status', retryAfterMs: 2000 }, 2, BACKOFF, BUDGET, 0.5)).toBeNull();
  });
  it('a dropped connection or a stream that failed before content: again, with a doubling backoff', () => {
    for (const kind of ['dropped', 'stream', 'first_token'] as const) {
      expect([1, 2, 3].map((tries) => retryDelay({ kind }, tries, BACKOFF, BUDGET, 0.5))).toEqual([250, 500, 1000]);
    }
  });
  it('never: nothing reached it, it never answered in time, or it gave its answer', () => {
    for (const kind of ['connect', 'timeout', 'context_length', 'client_error'] as const) expect(retryDelay({ kind }, 1, BACKOFF, BUDGET, 0.5)).toBeNull();
  });
  it('never when the wait does not fit what is left of the budget', () => {
    expect(retryDelay({ kind: 'status', retryAfterMs: 60_000 }, 1, BACKOFF, 3_000, 0.5)).toBeNull();
    expect(retryDelay({ kind: 'stream' }, 1, BACKOFF, 100, 0.5)).toBeNull();
  });
  it('jitters the backoff within [½, 1½)', () => {
    expect(backoff(200, 1, 0)).toBe(100);
    expect(backoff(200, 1, 0.999)).toBeCloseTo(299.8);
  });
});

describe('chargesFleet: what the fleet retry budget limits', () => {
  it('never the first attempt, nor moving on to another endpoint after a connection-level failure', () => {
    expect(chargesFleet(null, false, false)).toBe(false);
    for (const kind of ['connect', 'dropped', 'timeout', 'abandoned'] as const) expect(chargesFleet({ kind }, false, false)).toBe(false);
  });
  it('every retry of the same endpoint, every retry round, every attempt after a failure status or stream', () => {
    expect(chargesFleet({ kind: 'connect' }, true, false)).toBe(true);
    expect(chargesFleet({ kind: 'dropped' }, false, true)).toBe(true);
    for (const kind of ['status', 'stream', 'first_token', 'context_length', 'client_error'] as const) expect(chargesFleet({ kind }, false, false)).toBe(true);
  });
});

describe('held statuses', () => {
  const RETRY = new Set([429, 500, 502, 503, 504]);
  const plain = { contextFallback: false, clientErrorsFail: false };
  it('holds the retry statuses; a client error only for a larger context or a fallback', () => {
    expect(holdsStatus(503, RETRY, plain)).toBe(true);
    expect(holdsStatus(400, RETRY, plain)).toBe(false);
    expect(holdsStatus(400, RETRY, { ...plain, contextFallback: true })).toBe(true);
    expect(holdsStatus(404, RETRY, { ...plain, clientErrorsFail: true })).toBe(true);
    expect(holdsStatus(200, RETRY, { contextFallback: true, clientErrorsFail: true })).toBe(false);
  });
  it('a held status read whole: a failure status, a context-length error, the answer after all, a fallback’s refusal', () => {
    const yes = () => true;
    const no = () => false;
    expect(heldVerdict(503, RETRY, plain, yes)).toBe('status');
    expect(heldVerdict(429, RETRY, { contextFallback: true, clientErrorsFail: true }, yes)).toBe('status');
    expect(heldVerdict(400, RETRY, { ...plain, contextFallback: true }, yes)).toBe('context_length');
    expect(heldVerdict(400, RETRY, { ...plain, contextFallback: true }, no)).toBe('answer');
    expect(heldVerdict(400, RETRY, { ...plain, clientErrorsFail: true }, no)).toBe('client_error');
  });
});

describe('exhaustedError: nothing answered', () => {
  const none: Exhaustion = { failed: 0, skipped: 0, testAt: Infinity, full: null, limited: null, last: undefined, budgetSpent: false };
  it('every candidate behind an open breaker: 503 circuit_breaker, Retry-After the time to the next test', () => {
    const err = exhaustedError({ ...none, skipped: 2, testAt: 10_000 + 4_200 }, { provider: 'pagedengine' }, 0, 900_000, 10_000);
    expect(err).toMatchObject({ status: 503, type: 'circuit_breaker', code: 503 });
    expect(err.headers).toEqual(['retry-after', '5']);
    expect(err.message).toContain('2 skipped');
  });
  it('failures and open breakers: 503 endpoint_unavailable counting both', () => {
    const err = exhaustedError({ ...none, failed: 1, skipped: 1, testAt: 1, last: 'refused' }, { provider: 'pagedengine' }, 1, 900_000, 0);
    expect(err.type).toBe('endpoint_unavailable');
    expect(err.message).toContain('1 endpoint failed (last: refused), 1 skipped for an open circuit breaker');
  });
  it('the budget spent: 504 naming it', () => {
    expect(exhaustedError({ ...none, budgetSpent: true, failed: 2 }, {}, 3, 3_000, 0)).toMatchObject({ status: 504, key: 'BUDGET_EXCEEDED' });
  });
});

describe('warmAlternative: a stall worth leaving for a learned first-token deadline', () => {
  const ep = (name: string, retired = false, hosted = false) =>
    ({ name, retired, profile: { characteristics: { hosted_service: hosted } } }) as unknown as Endpoint;
  const [a, b, c, h] = [ep('a'), ep('b'), ep('c', true), ep('h', false, true)];
  const cand = (endpoint: Endpoint, model?: string) => ({ endpoint, model }) as unknown as Candidate;
  const coldOn =
    (...eps: Endpoint[]) =>
    (e: Endpoint) =>
      eps.includes(e);

  it('a later candidate on another endpoint with the model loaded, and the model loaded here', () => {
    expect(warmAlternative([cand(a), cand(b)], 0, 'm', coldOn())).toBe(true);
    expect(warmAlternative([cand(a), cand(b)], 0, 'm', coldOn(b))).toBe(false);
    expect(warmAlternative([cand(a), cand(b)], 0, 'm', coldOn(a))).toBe(false);
    expect(warmAlternative([cand(a), cand(b)], 1, 'm', coldOn())).toBe(false);
    expect(warmAlternative([cand(a), cand(a, 'm')], 0, 'm', coldOn())).toBe(false);
    // A fallback model on the same endpoint: a hosted service's, loaded, is worth it; an engine's waits behind the stall.
    expect(warmAlternative([cand(h), cand(h, 'other')], 0, 'm', coldOn())).toBe(true);
    expect(warmAlternative([cand(h), cand(h, 'other')], 0, 'm', (_e, m) => m === 'other')).toBe(false);
    expect(warmAlternative([cand(a), cand(a, 'other')], 0, 'm', coldOn())).toBe(false);
    expect(warmAlternative([cand(a), cand(c)], 0, 'm', coldOn())).toBe(false);
    // A fallback model: whether it is loaded is asked of its own name.
    expect(warmAlternative([cand(a), cand(b, 'fb')], 0, 'm', (e, m) => e === b && m === 'm')).toBe(true);
  });
});
