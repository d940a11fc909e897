// The per-endpoint slots and FIFO queue on their own: admission order, the ways a wait ends,
// slots handed straight to the longest waiter, new limits on reload, retirement.
import { describe, expect, it } from 'vitest';
import { EndpointQueue, type Turn } from '../../../engine/backends/queue.js';
import { waitFor } from '../../helpers/wait.js';

const settings = (maxConcurrent: number, maxQueued = 10, timeoutMs = 60_000) => ({ maxConcurrent, maxQueued, timeoutMs });

/** Queue a waiter; its outcome lands in `turns` under its label. */
function enqueue(q: EndpointQueue, turns: Record<string, Turn>, label: string) {
  return q.wait((t) => (turns[label] = t));
}

describe('EndpointQueue', () => {
  it('admits up to the limit at once, then queues', () => {
    const q = new EndpointQueue(settings(2));
    expect([q.tryEnter(), q.tryEnter(), q.tryEnter()]).toEqual([true, true, false]);
    expect(q.held).toBe(2);
    expect(q.hasFreeSlot).toBe(false);
  });

  it('hands a released slot to the longest waiter, in FIFO order, keeping the count', () => {
    const q = new EndpointQueue(settings(1));
    const turns: Record<string, Turn> = {};
    expect(q.tryEnter()).toBe(true);
    enqueue(q, turns, 'a');
    enqueue(q, turns, 'b');
    expect(q.queued).toBe(2);
    q.release(performance.now());
    expect(turns).toEqual({ a: 'admitted' });
    expect([q.held, q.queued]).toEqual([1, 1]);
    q.release(performance.now());
    expect(turns).toEqual({ a: 'admitted', b: 'admitted' });
    q.release(performance.now());
    expect([q.held, q.queued, q.admitted, q.waits.total]).toEqual([0, 0, 3, 2]);
  });

  it('keeps FIFO: nobody jumps a queue while a slot is being handed over', () => {
    const q = new EndpointQueue(settings(1));
    q.tryEnter();
    enqueue(q, {}, 'a');
    expect(q.tryEnter()).toBe(false);
  });

  it('is full at max_queued_requests; 0 means nobody waits', () => {
    const q = new EndpointQueue(settings(1, 1));
    q.tryEnter();
    expect(q.full).toBe(false);
    enqueue(q, {}, 'a');
    expect(q.full).toBe(true);
    expect(new EndpointQueue(settings(1, 0)).full).toBe(true);
  });

  it('lets a waiter whose client left go at once, and counts it', () => {
    const q = new EndpointQueue(settings(1));
    const turns: Record<string, Turn> = {};
    q.tryEnter();
    const a = enqueue(q, turns, 'a');
    enqueue(q, turns, 'b');
    q.leave(a);
    expect(turns).toEqual({ a: 'gone' });
    q.release(performance.now());
    expect(turns).toEqual({ a: 'gone', b: 'admitted' });
    q.leave(a); // twice: nothing more happens
    expect(q.abandoned).toBe(1);
  });

  it('ends a wait past the queue timeout', async () => {
    const q = new EndpointQueue(settings(1, 10, 20));
    const turns: Record<string, Turn> = {};
    q.tryEnter();
    enqueue(q, turns, 'a');
    await waitFor(() => turns.a, 'the wait to time out');
    expect(turns.a).toBe('timeout');
    expect([q.queued, q.timedOut, q.held]).toEqual([0, 1, 1]);
  });

  it('admits waiters at once when a reload raises the limit or removes it', () => {
    const q = new EndpointQueue(settings(1));
    const turns: Record<string, Turn> = {};
    q.tryEnter();
    for (const l of ['a', 'b', 'c']) enqueue(q, turns, l);
    q.configure(settings(2));
    expect(turns).toEqual({ a: 'admitted' });
    q.lift();
    expect(turns).toEqual({ a: 'admitted', b: 'admitted', c: 'admitted' });
    expect(q.held).toBe(4);
  });

  it('sends every waiter on when the endpoint is retired', () => {
    const q = new EndpointQueue(settings(1));
    const turns: Record<string, Turn> = {};
    q.tryEnter();
    enqueue(q, turns, 'a');
    enqueue(q, turns, 'b');
    q.retire();
    expect(turns).toEqual({ a: 'retired', b: 'retired' });
    expect(q.queued).toBe(0);
  });

  it('estimates Retry-After from the time slots are held, 1 to 60 seconds', () => {
    const q = new EndpointQueue(settings(1));
    expect(q.retryAfterSeconds()).toBe(1);
    q.tryEnter();
    q.release(performance.now() - 9_900); // a slot held for about 9.9 s
    q.tryEnter();
    enqueue(q, {}, 'a');
    expect(q.retryAfterSeconds()).toBe(20); // one ahead plus this one, ~9.9 s each, one slot: 19.8 s, rounded up
    for (let i = 0; i < 10; i++) enqueue(q, {}, `w${i}`);
    expect(q.retryAfterSeconds()).toBe(60);
  });

  it('reports wait percentiles of the requests that queued', () => {
    const q = new EndpointQueue(settings(1));
    q.tryEnter();
    enqueue(q, {}, 'a');
    q.release(performance.now());
    expect(q.waits.percentile(50)).toBeGreaterThanOrEqual(0);
    expect(q.waits.total).toBe(1);
  });
});
