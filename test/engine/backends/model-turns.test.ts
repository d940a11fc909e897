// An engine that holds few models at once (one GPU): its queue serves the requests for the held
// models first and switches in batches, never passing a request over for longer than max_wait
// (once the model switched to has had min_dwell), and never sends a model's first request while
// the evicted model's requests are still in flight. Times are given, not waited for.
import { describe, expect, it } from 'vitest';
import { ModelTurns } from '../../../engine/backends/model-turns.js';
import { EndpointQueue, type Turn, type Waiter } from '../../../engine/backends/queue.js';

const SETTINGS = { atOnce: 1, maxWaitMs: 10_000, minDwellMs: 2_000 };
const waiter = (model: string, since: number): Waiter => ({ model, since, settle: () => {}, timer: null });

describe('whose turn it is', () => {
  it('a request for the held model goes ahead of waiters for other models, until one of them waited max_wait', () => {
    const t = new ModelTurns(SETTINGS);
    expect(t.mayEnter('a', undefined, 0)).toBe(true);
    t.entered('a', 0, 0);
    const b = waiter('b', 100);
    // b waits (a is in flight); more requests for a go first.
    expect(t.mayEnter('b', undefined, 100)).toBe(false);
    expect(t.mayEnter('a', b, 5_000)).toBe(true);
    // Past max_wait, b is next: nothing for a enters ahead of it any more.
    expect(t.mayEnter('a', b, 100 + 10_000)).toBe(false);
  });

  it('switches when the held model is idle, to the model most waiters want', () => {
    const t = new ModelTurns(SETTINGS);
    t.entered('a', 0, 0);
    const waiting = new Set([waiter('b', 10), waiter('c', 20), waiter('c', 30)]);
    // a still in flight: nobody waits for it, but its client may come back: no switch yet.
    expect(t.pick(waiting, 50)).toBeNull();
    t.left('a');
    const next = t.pick(waiting, 60)!;
    expect(next.model).toBe('c');
    t.entered('c', 60, 40);
    expect(t.counts(waiting).held).toEqual(['c']);
    expect(t.switches).toBe(2);
  });

  it('a waiter passed over for max_wait is switched to once the held model had min_dwell, and the evicted model drains first', () => {
    const t = new ModelTurns(SETTINGS);
    t.entered('a', 0, 0);
    const b = waiter('b', 0);
    const a2 = waiter('a', 9_000);
    const waiting = new Set([b, a2]);
    // Before max_wait: a's waiter goes.
    expect(t.pick(waiting, 9_500)).toBe(a2);
    waiting.delete(a2);
    t.entered('a', 9_500, 500);
    // b is due; a has requests in flight: the switch waits for them, and admits nothing meanwhile.
    expect(t.pick(waiting, 10_000)).toBeNull();
    expect(t.counts(waiting).switching).toBe('b');
    expect(t.mayEnter('a', b, 10_001)).toBe(false);
    t.left('a');
    expect(t.pick(waiting, 10_100)).toBeNull();
    t.left('a');
    expect(t.pick(waiting, 10_200)).toBe(b);
    t.entered('b', 10_200, 10_200);
    expect(t.longestWaitMs).toBe(10_200);
    expect(t.counts(new Set()).held).toEqual(['b']);
  });

  it('min_dwell: a model just switched to keeps its turn against a due waiter while its own still wait', () => {
    const t = new ModelTurns(SETTINGS);
    t.entered('b', 20_000, 0);
    const old = waiter('a', 5_000);
    const forB = waiter('b', 20_500);
    const waiting = new Set([old, forB]);
    // a waited 16 s (due), but b was switched to 1 s ago and has a waiter: b's goes.
    expect(t.pick(waiting, 21_000)).toBe(forB);
    waiting.delete(forB);
    t.entered('b', 21_000, 500);
    waiting.add(waiter('b', 21_500));
    // Dwell over: the due waiter's model is next.
    t.left('b');
    t.left('b');
    expect(t.pick(waiting, 22_000)).toBe(old);
  });

  it('holds models_at_once models: another is loaded beside them without waiting for either', () => {
    const t = new ModelTurns({ ...SETTINGS, atOnce: 2 });
    t.entered('a', 0, 0);
    expect(t.mayEnter('b', undefined, 10)).toBe(true);
    t.entered('b', 10, 0);
    // Both held and busy: c waits for the least recently used one to be idle.
    expect(t.mayEnter('c', undefined, 20)).toBe(false);
    const c = waiter('c', 20);
    t.left('a');
    expect(t.pick(new Set([c]), 30)).toBe(c);
    t.entered('c', 30, 10);
    expect(t.counts(new Set()).held).toEqual(['b', 'c']);
  });

  it('evicts the least recently used model with nothing in flight, not a busy one', () => {
    const t = new ModelTurns({ ...SETTINGS, atOnce: 2 });
    t.entered('a', 0, 0);
    t.entered('b', 10, 0);
    t.left('b');
    // a is the least recently used but busy; b is idle: c takes b's place at once.
    expect(t.mayEnter('c', undefined, 20)).toBe(true);
    t.entered('c', 20, 0);
    expect(t.counts(new Set()).held).toEqual(['a', 'c']);
  });

  it('what the engine reports held replaces what was assumed', () => {
    const t = new ModelTurns(SETTINGS);
    t.entered('a', 0, 0);
    t.left('a');
    // The engine no longer holds a (it unloaded it): a goes.
    t.observe((m) => m === 'b', ['b']);
    expect(t.counts(new Set()).held).toEqual([]);
    // At a start (nothing held), the engine's own names are taken.
    t.observe((m) => m === 'b', ['b']);
    expect(t.mayEnter('b', undefined, 10)).toBe(true);
    expect(t.counts(new Set()).held).toEqual(['b']);
  });

  it("matches the engine's report through its name rules: llama3 is held when it reports llama3:latest", () => {
    const t = new ModelTurns(SETTINGS);
    t.entered('llama3', 0, 0);
    t.left('llama3');
    t.observe((m) => (m === 'llama3' ? true : undefined), ['llama3:latest']);
    expect(t.counts(new Set()).held).toEqual(['llama3']);
    expect(t.cold('llama3')).toBe(false);
    expect(t.switches).toBe(1);
  });

  it('a switch decided for a waiter who then left is called off', () => {
    const t = new ModelTurns({ ...SETTINGS, minDwellMs: 0 });
    t.entered('a', 0, 0);
    const b = waiter('b', 0);
    const waiting = new Set([b]);
    // b is due; a is in flight: the switch waits.
    expect(t.pick(waiting, 20_000)).toBeNull();
    expect(t.counts(waiting).switching).toBe('b');
    waiting.delete(b);
    t.cancelled(waiting);
    expect(t.counts(waiting).switching).toBeNull();
    expect(t.mayEnter('a', undefined, 20_001)).toBe(true);
  });

  it('fewer models at once after a reload: the idle ones over the number go; a busy one is no longer counted held', () => {
    const t = new ModelTurns({ ...SETTINGS, atOnce: 3 });
    for (const m of ['a', 'b', 'c']) t.entered(m, 0, 0);
    t.left('b');
    t.configure({ ...SETTINGS, atOnce: 1 });
    // b (idle) went; a and c are busy: c, the most recent, counts held; a waits its turn.
    expect(t.counts(new Set()).held).toEqual(['a', 'c']);
    expect(t.mayEnter('c', undefined, 1)).toBe(true);
    expect(t.mayEnter('a', undefined, 1)).toBe(false);
  });

  it('a load ends with an answer, not with a request that failed or whose client left', () => {
    const t = new ModelTurns(SETTINGS);
    t.entered('a', 0, 0);
    t.entered('a', 1, 0);
    t.left('a', false);
    expect(t.cold('a')).toBe(true);
    t.left('a', true);
    expect(t.cold('a')).toBe(false);
  });

  it('a report older than the switch does not take the model in flight away', () => {
    const t = new ModelTurns(SETTINGS);
    t.entered('a', 0, 0);
    t.left('a');
    t.entered('b', 10, 0);
    // The engine's report, read before the switch, still says a.
    t.observe((m) => m === 'a', ['a']);
    expect(t.counts(new Set()).held).toEqual(['b']);
    expect(t.mayEnter('a', undefined, 20)).toBe(false);
  });

  it('a request without a model never waits for a switch', () => {
    const t = new ModelTurns(SETTINGS);
    t.entered('a', 0, 0);
    expect(t.mayEnter('', undefined, 10)).toBe(true);
  });
});

describe('the endpoint queue served by model', () => {
  it('a waiter that leaves while a switch for it waits on requests in flight lets the held model go on', () => {
    const q = new EndpointQueue({ maxConcurrent: 3, maxQueued: 100, timeoutMs: 60_000, turns: { atOnce: 1, maxWaitMs: 0, minDwellMs: 0 } });
    expect(q.tryEnter('a')).toBe(true);
    expect(q.tryEnter('a')).toBe(true);
    const b = q.wait(() => {}, 'b');
    // One a done: b is due, the other a still runs: a switch to b waits for it.
    q.release(performance.now(), 'a');
    expect(q.counts().turns).toMatchObject({ switching: 'b' });
    expect(q.tryEnter('a')).toBe(false);
    // b's client leaves: the switch is off, and a may go on.
    q.leave(b);
    expect(q.counts().turns).toMatchObject({ switching: null });
    expect(q.tryEnter('a')).toBe(true);
  });

  it('lifting the limit serves every waiter now, in arrival order', () => {
    const q = new EndpointQueue({ maxConcurrent: 1, maxQueued: 100, timeoutMs: 60_000, turns: { atOnce: 1, maxWaitMs: 60_000, minDwellMs: 0 } });
    expect(q.tryEnter('a')).toBe(true);
    const admitted: string[] = [];
    q.wait((t) => t === 'admitted' && admitted.push('b'), 'b');
    q.lift();
    expect(admitted).toEqual(['b']);
    expect(q.turns).toBeNull();
  });

  it('admits the held model first, switches in a batch, and never starves a request past max_wait', async () => {
    const q = new EndpointQueue({ maxConcurrent: 2, maxQueued: 100, timeoutMs: 60_000, turns: { atOnce: 1, maxWaitMs: 60_000, minDwellMs: 0 } });
    const order: string[] = [];
    const enqueue = (model: string) =>
      new Promise<Turn>((resolve) =>
        q.wait((turn) => {
          if (turn === 'admitted') order.push(model);
          resolve(turn);
        }, model),
      );
    expect(q.tryEnter('a')).toBe(true);
    expect(q.tryEnter('a')).toBe(true);
    // Both slots busy: b, a, b, a wait.
    const waits = ['b', 'a', 'b', 'a'].map((m) => enqueue(m));
    // One slot back: the waiting request for a (held) goes before the older b.
    q.release(performance.now(), 'a');
    expect(order).toEqual(['a']);
    q.release(performance.now(), 'a');
    expect(order).toEqual(['a', 'a']);
    // Both a's done: nothing for a waits or runs: the b's go together.
    q.release(performance.now(), 'a');
    q.release(performance.now(), 'a');
    expect(order).toEqual(['a', 'a', 'b', 'b']);
    expect(q.counts().turns).toMatchObject({ held: ['b'], switches: 2 });
    q.release(performance.now(), 'b');
    q.release(performance.now(), 'b');
    expect(await Promise.all(waits)).toEqual(['admitted', 'admitted', 'admitted', 'admitted']);
  });
});

describe("a worker's side of the host's queue served by model", () => {
  it('knows the engine may be loading a model when the host says so at its admission', async () => {
    const { HostQueue } = await import('../../../engine/backends/sharing/host-stand-ins.js');
    const answers: [Turn, boolean][] = [
      ['admitted', true],
      ['admitted', false],
    ];
    const asks = {
      acquire: (_id: string, then: (turn: Turn, cold: boolean) => void) => {
        const [turn, cold] = answers.shift()!;
        queueMicrotask(() => then(turn, cold));
        return 1;
      },
      leave: () => {},
      release: () => {},
    };
    const settings = { maxConcurrent: 1, maxQueued: 10, timeoutMs: 60_000, turns: { atOnce: 1, maxWaitMs: 30_000, minDwellMs: 0 } };
    const q = new HostQueue(settings, { id: 'gpu' } as never, asks);
    // The host decides whose turn it is: the worker keeps no turns of its own.
    expect(q.turns).toBeNull();
    await new Promise<Turn>((r) => q.wait(r, 'beta'));
    expect(q.coldFor('beta')).toBe(true);
    q.release(performance.now(), 'beta');
    await new Promise<Turn>((r) => q.wait(r, 'beta'));
    expect(q.coldFor('beta')).toBe(false);
  });
});
