// Whose turn it is on an engine that holds only a few models at once (one GPU: Ollama with
// several models pulled, llama-server in router mode, llama-swap, LM Studio's just-in-time
// loading). Serving requests in arrival order makes such an engine unload and load a model on
// nearly every request when they interleave models (A B A B: 5–60 s each); this serves the
// requests for the models it holds first and switches in batches:
//  - a waiter for a held model goes first (oldest first), and so does a request for a held model
//    that arrives while others wait for other models;
//  - when the held model is idle (nothing in flight, nobody waiting for it), the model most
//    waiters ask for is switched to (the oldest's among equals): the biggest batch; while its
//    requests run, their clients' next ones may ask for it again;
//  - a waiter passed over for `maxWaitMs` is switched to next, once the model now held has had
//    `minDwellMs` since it was switched to (so no one starves, and nothing flaps);
//  - a switch that evicts a model lets that model's requests in flight finish first (an engine
//    asked for a second model while it still serves the first fails or hangs requests: measured
//    on llama-server's router with --models-max 1), and admits nothing meanwhile.
// What is held is what this gateway last sent, corrected by what the engine reports (residency).

import type { Waiter } from './queue.js';

export interface ModelTurnSettings {
  /** Models the engine holds at once. */
  atOnce: number;
  /** The longest a request is passed over for other models' requests. */
  maxWaitMs: number;
  /** The least time a model switched to is kept against older waiters for other models. */
  minDwellMs: number;
}

/** Counters for the status routes and metrics. */
export interface TurnCounts {
  /** Models held, least recently used first. */
  held: string[];
  /** The model switched to that the engine is loading (nothing for it finished yet); null: none. */
  loading: string | null;
  /** Waiting requests by model. */
  waitingByModel: Record<string, number>;
  /** Switches made (a model loaded in place of another, or beside it). */
  switches: number;
  /** The longest a request waited for its model, since the start. */
  longestWaitMs: number;
  /** The model being switched to while the evicted one's requests finish; null: none. */
  switching: string | null;
}

export class ModelTurns {
  /** Models held, least recently used first. */
  private held: string[] = [];
  private readonly inFlight = new Map<string, number>();
  /** Models switched to whose first request has not finished yet: the engine is loading them
   *  (since when). A load is not a failure: health checks and first-token deadlines allow for it. */
  private readonly loads = new Map<string, number>();
  /** A switch decided and waiting for the evicted model's requests to finish. */
  private pending: { model: string; evict: string } | null = null;
  private switchedAt = Number.NEGATIVE_INFINITY;
  switches = 0;
  longestWaitMs = 0;

  constructor(private settings: ModelTurnSettings) {}

  /** New settings (a reload): fewer models at once evicts the idle ones over the number at once;
   *  a busy one over it is no longer counted held, and goes when its requests are done. */
  configure(settings: ModelTurnSettings): void {
    this.settings = settings;
    while (this.held.length > settings.atOnce) {
      const idle = this.held.find((m) => !this.inFlight.has(m));
      if (idle === undefined) break;
      this.evict(idle);
    }
  }

  /** Held and counted so: among the `atOnce` most recently used. A request without a model (or
   *  for one the engine need not load) never waits for a switch. */
  private holds(model: string): boolean {
    if (model === '') return true;
    const at = this.held.indexOf(model);
    return at >= 0 && at >= this.held.length - this.settings.atOnce;
  }

  /** Whether a request for `model` may take a free slot now, ahead of those waiting (`oldest`:
   *  the longest waiter, or undefined). */
  mayEnter(model: string, oldest: Waiter | undefined, now: number): boolean {
    if (this.pending !== null) return false;
    if (oldest !== undefined && !this.holds(oldest.model) && now - oldest.since >= this.settings.maxWaitMs) return false;
    if (this.holds(model)) return true;
    if (oldest !== undefined) return false;
    // Nobody waits: load it beside what is held, or in place of a model with nothing in flight.
    if (this.held.length < this.settings.atOnce) return true;
    const evict = this.victim();
    if (this.inFlight.has(evict)) return false;
    this.evict(evict);
    return true;
  }

  /** The waiter to admit into a free slot; null: none may go yet (a switch waits for requests in
   *  flight to finish). `waiting` is in arrival order. */
  pick(waiting: Iterable<Waiter>, now: number): Waiter | null {
    if (this.pending !== null) return this.finishSwitch(waiting);
    let oldest: Waiter | undefined;
    let due: Waiter | undefined;
    let forHeld: Waiter | undefined;
    // Arrival order: the first waiter found is the oldest; past one younger than maxWaitMs, none is due.
    for (const w of waiting) {
      oldest ??= w;
      const old = now - w.since >= this.settings.maxWaitMs;
      if (this.holds(w.model)) forHeld ??= w;
      else if (old) due ??= w;
      if (forHeld !== undefined && (due !== undefined || !old)) break;
    }
    if (oldest === undefined) return null;
    if (due !== undefined && (forHeld === undefined || now - this.switchedAt >= this.settings.minDwellMs)) return this.switchTo(due.model, waiting);
    if (forHeld !== undefined) return forHeld;
    // Nobody waits for a held model: load the most wanted beside it, or in its place once it is idle.
    if (this.held.length >= this.settings.atOnce) {
      const evict = this.victim();
      if (this.inFlight.has(evict)) return null;
      this.evict(evict);
    }
    return firstFor(mostWanted(waiting), waiting);
  }

  /** A request for `model` took a slot (at once, or after waiting `waitedMs`). */
  entered(model: string, now: number, waitedMs: number): void {
    this.inFlight.set(model, (this.inFlight.get(model) ?? 0) + 1);
    if (waitedMs > this.longestWaitMs) this.longestWaitMs = waitedMs;
    if (model === '') return;
    const at = this.held.indexOf(model);
    if (at >= 0) this.held.splice(at, 1);
    else {
      this.switches++;
      this.switchedAt = now;
      this.loads.set(model, now);
    }
    this.held.push(model);
  }

  /** The engine may be loading `model` for a request sent now: it is not held, or was switched
   *  to and nothing for it has finished since. */
  cold(model: string): boolean {
    return model !== '' && (!this.holds(model) || this.loads.has(model));
  }

  /** The model being loaded, and since when (performance.now()); null: none. */
  loading(): { model: string; since: number } | null {
    for (const [model, since] of this.loads) return { model, since };
    return null;
  }

  /** A request for `model` gave its slot back; `answered`: the engine answered it (so the model is
   *  loaded), rather than the request failing or its client leaving first. */
  left(model: string, answered = true): void {
    if (answered) this.loads.delete(model);
    const n = (this.inFlight.get(model) ?? 1) - 1;
    if (n > 0) this.inFlight.set(model, n);
    else this.inFlight.delete(model);
  }

  /** The engine reported what it holds (residency): `loaded` answers for a model as clients name
   *  it (through the engine's name rules: llama3 is llama3:latest); `names` are the engine's own.
   *  A model with requests in flight here stays held whatever the report says (it may be older
   *  than the switch to it); a held one the engine no longer holds goes; with nothing held (a
   *  start), the engine's names are taken as they are. */
  observe(loaded: (model: string) => boolean | undefined, names: readonly string[]): void {
    const busy = this.held.filter((m) => this.inFlight.has(m));
    const kept = this.held.filter((m) => !busy.includes(m) && loaded(m) === true);
    const room = Math.max(0, this.settings.atOnce - busy.length);
    const confirmed = room === 0 ? [] : this.held.length === 0 ? names.slice(0, room) : kept.slice(-room);
    for (const m of confirmed) this.loads.delete(m);
    this.held = [...confirmed, ...busy];
  }

  /** A waiter left without its turn (its wait timed out, its client went away): a switch decided
   *  for its model alone is called off. */
  cancelled(waiting: Iterable<Waiter>): void {
    if (this.pending !== null && firstFor(this.pending.model, waiting) === null) this.pending = null;
  }

  counts(waiting: Iterable<Waiter>): TurnCounts {
    const byModel: Record<string, number> = {};
    for (const w of waiting) byModel[w.model] = (byModel[w.model] ?? 0) + 1;
    return {
      held: [...this.held],
      loading: this.loading()?.model ?? null,
      waitingByModel: byModel,
      switches: this.switches,
      longestWaitMs: this.longestWaitMs,
      switching: this.pending?.model ?? null,
    };
  }

  /** Switch to `model`: beside what is held while there is room, else in place of the least
   *  recently used model once its requests in flight are done. */
  private switchTo(model: string, waiting: Iterable<Waiter>): Waiter | null {
    if (this.held.length < this.settings.atOnce) return firstFor(model, waiting);
    this.pending = { model, evict: this.victim() };
    return this.finishSwitch(waiting);
  }

  private finishSwitch(waiting: Iterable<Waiter>): Waiter | null {
    const p = this.pending!;
    if ((this.inFlight.get(p.evict) ?? 0) > 0) return null;
    this.pending = null;
    this.evict(p.evict);
    // Its waiters may have left meanwhile: then the next pick decides afresh.
    return firstFor(p.model, waiting) ?? this.pick(waiting, performance.now());
  }

  /** The model a switch evicts: the least recently used with nothing in flight, else the least
   *  recently used. */
  private victim(): string {
    return this.held.find((m) => !this.inFlight.has(m)) ?? this.held[0];
  }

  private evict(model: string): void {
    const at = this.held.indexOf(model);
    if (at >= 0) this.held.splice(at, 1);
    this.loads.delete(model);
  }
}

/** The model most waiters ask for; among equals, the one asked for first. */
function mostWanted(waiting: Iterable<Waiter>): string {
  const count = new Map<string, number>();
  let best = '';
  let most = 0;
  for (const w of waiting) {
    const n = (count.get(w.model) ?? 0) + 1;
    count.set(w.model, n);
    if (n > most) {
      most = n;
      best = w.model;
    }
  }
  return best;
}

function firstFor(model: string, waiting: Iterable<Waiter>): Waiter | null {
  for (const w of waiting) if (w.model === model) return w;
  return null;
}
