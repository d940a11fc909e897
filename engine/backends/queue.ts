// Per-endpoint concurrency: at most `maxConcurrent` attempts in flight to one endpoint (a desktop
// runner that handles one request at a time, say); the rest wait in a bounded FIFO queue. The
// attempt loop takes a slot before it sends an attempt and gives it back exactly once when the attempt
// is over (the reply ended, failed or was abandoned; a stream holds its slot to the end). A slot
// given back goes straight to the longest waiter. A waiter leaves the queue when it is admitted,
// when its wait passes `timeoutMs`, when its client goes away, or when the endpoint is retired.
// Endpoints without a limit have no queue at all (Endpoint.queue is null): nothing on their path.
// An engine that holds only a few models at once has a queue that orders its waiters by model
// instead (model-turns.ts), with or without a concurrency limit.
import { ModelTurns, type ModelTurnSettings, type TurnCounts } from './model-turns.js';

export interface QueueSettings {
  /** Attempts in flight at once. */
  maxConcurrent: number;
  /** Requests that may wait for a slot; one more is turned away (the attempt loop tries the next endpoint). */
  maxQueued: number;
  /** The longest a request waits for a slot. */
  timeoutMs: number;
  /** The engine holds this few models at once: waiters are served by model (model-turns.ts). */
  turns?: ModelTurnSettings | null;
}

/** How a wait ended ('full': the host's queue, asked by a worker, had no room: sharing/host-stand-ins.ts). */
export type Turn = 'admitted' | 'timeout' | 'gone' | 'retired' | 'full';

/** One waiting request; `settle` is called exactly once. */
export interface Waiter {
  readonly since: number;
  /** The model it asks for ('' for none). */
  readonly model: string;
  settle(turn: Turn): void;
  timer: NodeJS.Timeout | null;
}

const WINDOW = 1024;

/** Recent waits (milliseconds) of requests that had to queue, for p50/p95. */
class WaitWindow {
  private readonly samples = new Float64Array(WINDOW);
  private count = 0;
  total = 0;
  totalMs = 0;

  add(ms: number): void {
    this.samples[this.count++ % WINDOW] = ms;
    this.total++;
    this.totalMs += ms;
  }

  percentile(p: number): number {
    const n = Math.min(this.count, WINDOW);
    if (n === 0) return 0;
    const sorted = this.samples.slice(0, n).sort();
    return sorted[Math.min(n - 1, Math.ceil((p / 100) * n) - 1)];
  }
}

/** A queue's counters as the status routes show them (a host sends its queues' to its workers). */
export interface QueueCounts {
  held: number;
  queued: number;
  admitted: number;
  rejectedFull: number;
  timedOut: number;
  abandoned: number;
  waited: number;
  waitedMs: number;
  waitP50: number;
  waitP95: number;
  /** Served by model: what is held, who waits for what, switches. */
  turns?: TurnCounts;
}

export class EndpointQueue {
  /** Slots held now (attempts in flight through this queue). */
  held = 0;
  /** Requests admitted at once or after waiting. */
  admitted = 0;
  /** Requests turned away because the queue was full (they may have gone to another endpoint). */
  rejectedFull = 0;
  /** Requests whose wait passed the queue timeout (answered 503). */
  timedOut = 0;
  /** Requests whose client went away while they waited. */
  abandoned = 0;
  readonly waits = new WaitWindow();
  private settings!: QueueSettings;
  /** Insertion order is FIFO order; a waiter whose client left is deleted in O(1). */
  private readonly waiting = new Set<Waiter>();
  /** Smoothed time a slot is held (ms), for Retry-After; 0 until a slot was given back. */
  private holdMs = 0;
  /** Waiters served by model; null: in arrival order. */
  turns: ModelTurns | null = null;

  constructor(settings: QueueSettings) {
    this.configure(settings);
  }

  get maxConcurrent(): number {
    return this.settings.maxConcurrent;
  }

  get maxQueued(): number {
    return this.settings.maxQueued;
  }

  get timeoutMs(): number {
    return this.settings.timeoutMs;
  }

  /** How waiters are served by model; null: in arrival order. */
  get turnSettings(): ModelTurnSettings | null {
    return this.settings.turns ?? null;
  }

  get queued(): number {
    return this.waiting.size;
  }

  counts(): QueueCounts {
    const w = this.waits;
    return {
      held: this.held,
      queued: this.queued,
      admitted: this.admitted,
      rejectedFull: this.rejectedFull,
      timedOut: this.timedOut,
      abandoned: this.abandoned,
      waited: w.total,
      waitedMs: w.totalMs,
      waitP50: w.percentile(50),
      waitP95: w.percentile(95),
      ...(this.turns ? { turns: this.turns.counts(this.waiting) } : {}),
    };
  }

  /** A slot is free now (candidate ordering prefers such endpoints). */
  get hasFreeSlot(): boolean {
    return this.held < this.settings.maxConcurrent;
  }

  /** Nobody else may wait: a request arriving now would be turned away. */
  get full(): boolean {
    return this.waiting.size >= this.settings.maxQueued;
  }

  /** New limits (a reload kept the endpoint): the queue and its waiters stay; a raised limit admits waiters now. */
  configure(settings: QueueSettings): void {
    this.settings = settings;
    if (!settings.turns) this.turns = null;
    else if (this.turns) this.turns.configure(settings.turns);
    else this.turns = new ModelTurns(settings.turns);
    this.admitWaiting();
  }

  /** The limit was removed: every waiter goes now; slots still held are given back as usual. */
  lift(): void {
    this.configure({ ...this.settings, maxConcurrent: Infinity, turns: null });
  }

  /** The engine may be loading `model` for a request admitted now (a switch); false when the
   *  queue serves in arrival order (it does not know). */
  coldFor(model: string): boolean {
    return this.turns?.cold(model) === true;
  }

  /** What the queue served by model holds and who waits for what; undefined: in arrival order. */
  turnCounts(): TurnCounts | undefined {
    return this.turns?.counts(this.waiting);
  }

  /** Take a slot for a request for `model` if one is free and nobody waits ahead (in arrival
   *  order, or by model: model-turns.ts): the fast path, no allocation. */
  tryEnter(model = ''): boolean {
    if (this.held >= this.settings.maxConcurrent) return false;
    const turns = this.turns;
    if (turns === null) {
      if (this.waiting.size > 0) return false;
    } else {
      const now = performance.now();
      if (!turns.mayEnter(model, this.waiting.values().next().value, now)) return false;
      turns.entered(model, now, 0);
    }
    this.held++;
    this.admitted++;
    return true;
  }

  /** Count a request turned away by the full queue. */
  reject(): void {
    this.rejectedFull++;
  }

  /** Wait for a slot; `settle` is called once with how the wait ended. The caller checks `full` first. */
  wait(settle: (turn: Turn) => void, model = ''): Waiter {
    const waiter: Waiter = { since: performance.now(), model, settle, timer: null };
    waiter.timer = setTimeout(() => this.end(waiter, 'timeout'), this.settings.timeoutMs);
    waiter.timer.unref?.();
    this.waiting.add(waiter);
    return waiter;
  }

  /** The waiter's client went away: it leaves the queue at once (nothing if it was already admitted). */
  leave(waiter: Waiter): void {
    this.end(waiter, 'gone');
  }

  /** Give back a slot taken at `since` (performance.now()) for `model`; it goes to the next
   *  waiter, if any. `answered`: the engine answered (a model it was switched to is loaded). */
  release(since: number, model = '', answered = true): void {
    const ms = performance.now() - since;
    this.holdMs = this.holdMs === 0 ? ms : this.holdMs * 0.8 + ms * 0.2;
    this.held--;
    this.turns?.left(model, answered);
    this.admitWaiting();
  }

  /** The endpoint left the configuration: its waiters move on to their next candidate. */
  retire(): void {
    for (const w of [...this.waiting]) this.end(w, 'retired');
  }

  /** Seconds a client might wait before a retry finds room: the queue ahead times the usual
   *  slot time, shared by the slots; 1 to 60. */
  retryAfterSeconds(): number {
    const s = this.settings;
    const estimate = (this.holdMs * (this.waiting.size + 1)) / s.maxConcurrent / 1000;
    return Math.min(60, Math.max(1, Math.ceil(estimate)));
  }

  private admitWaiting(): void {
    while (this.held < this.settings.maxConcurrent && this.waiting.size > 0) {
      const now = performance.now();
      const next = this.turns === null ? (this.waiting.values().next().value as Waiter) : this.turns.pick(this.waiting, now);
      // A switch of models waits for the requests in flight for the one it evicts.
      if (next === null) return;
      this.held++;
      this.admitted++;
      this.waits.add(now - next.since);
      this.turns?.entered(next.model, now, now - next.since);
      this.end(next, 'admitted');
    }
  }

  private end(waiter: Waiter, turn: Turn): void {
    if (!this.waiting.delete(waiter)) return;
    if (waiter.timer) clearTimeout(waiter.timer);
    if (turn === 'timeout') this.timedOut++;
    else if (turn === 'gone') this.abandoned++;
    waiter.settle(turn);
    // Served by model: a switch for its model alone is off, and the others may go.
    if (turn !== 'admitted' && this.turns !== null) {
      this.turns.cancelled(this.waiting);
      this.admitWaiting();
    }
  }
}
