// The order candidates are tried in, in passes over the routable endpoints:
// 1. the balancing strategy: priority, round-robin, least-connections, p2c — each honouring the
//    endpoints' weights;
// 2. conversation affinity (affinity.ts): a request with a key tries the equally preferred (the
//    top priority under `priority`, every candidate otherwise) in the key's order, its endpoint
//    first; the strategy's order for the rest;
// 3. state weights: a Busy or Warming endpoint keeps only 1 in N of the first places it is given
//    while a Healthy endpoint is among the candidates (proxy.degraded_traffic); the other first
//    places go to the Healthy ones. Counted per endpoint, no randomness: shares are exact;
// 4. capacity: endpoints with a free slot (or no concurrency limit) before those whose every slot
//    is held, so a request queues only where no candidate can take it now;
// 5. pauses: an endpoint whose last 429 or 503 asked to wait (Retry-After) comes last until the
//    wait is over: it is tried only when nothing better is left.
// Load is an endpoint's requests in flight plus what its engine reports serving for others
// (Endpoint.load, backends/engine-load.ts).
import type { AffinityNote, Endpoint, Placements } from '../../engine/api.js';
import { rankKey, score, type AffinityKey } from './affinity.js';

/** `model`: the name the request asks for, where it names one (p2c prefers endpoints that have it loaded). */
export type Order = (routable: readonly Endpoint[], key?: AffinityKey | null, model?: string) => readonly Endpoint[];

/** What a strategy may ask the backends' state: is the model not loaded there (Ollama's api/ps,
 *  LM Studio's state: backends/residency.ts)? */
export interface BalancingState {
  cold(ep: Endpoint, model: string): boolean;
}

const byPriority = (a: Endpoint, b: Endpoint) => b.priority - a.priority;

/** Smooth weighted round-robin (nginx's): each turn every endpoint gains its weight, the richest
 *  is chosen and pays the total. Equal weights give plain turns; weight 2 takes two turns in three
 *  against a weight-1 peer, spread out rather than back to back. */
class Turns {
  private readonly credit = new WeakMap<Endpoint, number>();

  /** Equal weights: plain turns, without the per-endpoint credit. */
  private turn = 0;

  /** The index of the next of list[0..n). */
  next(list: readonly Endpoint[], n: number): number {
    let equal = true;
    for (let i = 0; i < n && equal; i++) equal = list[i].weight === 1;
    if (equal) return this.turn++ % n;
    let total = 0;
    let best = 0;
    let richest = -Infinity;
    for (let i = 0; i < n; i++) {
      const ep = list[i];
      const c = (this.credit.get(ep) ?? 0) + ep.weight;
      this.credit.set(ep, c);
      total += ep.weight;
      if (c > richest) {
        richest = c;
        best = i;
      }
    }
    this.credit.set(list[best], richest - total);
    return best;
  }
}

/** Highest priority first; endpoints sharing the top priority take turns by weight. */
function priority(): Order {
  const turns = new Turns();
  return (routable) => {
    if (routable.length === 1) return routable;
    const sorted = [...routable].sort(byPriority);
    let tier = 1;
    while (tier < sorted.length && sorted[tier].priority === sorted[0].priority) tier++;
    if (tier > 1) {
      const k = turns.next(sorted, tier);
      return [...sorted.slice(k, tier), ...sorted.slice(0, k), ...sorted.slice(tier)];
    }
    return sorted;
  };
}

/** Each request starts one endpoint further along (by weight); failover continues around the ring. */
function roundRobin(): Order {
  const turns = new Turns();
  return (routable) => {
    const n = routable.length;
    if (n === 1) return routable;
    const k = turns.next(routable, n);
    return [...routable.slice(k), ...routable.slice(0, k)];
  };
}

/** Least load for its weight first; ties go to the heavier, then the higher priority, then configuration order. */
function leastConnections(): Order {
  return (routable) => {
    if (routable.length === 1) return routable;
    const now = performance.now();
    return [...routable].sort((a, b) => a.load(now) / a.weight - b.load(now) / b.weight || b.weight - a.weight || byPriority(a, b));
  };
}

/** What p2c compares: (load + 1) × recent time to first byte, per unit of weight. An endpoint
 *  not measured yet is taken to be as fast as `unmeasured` (its measured peers' average), so it
 *  is tried like them and its load decides. */
export function p2cCost(ep: Endpoint, now: number, unmeasured = 1): number {
  const latency = ep.latency.samples === 0 ? unmeasured : ep.latency.value(now);
  return ((ep.load(now) + 1) * latency) / ep.weight;
}

/** The candidates' average time to first byte, for those not measured yet (1 when none is). */
function peersLatency(list: readonly Endpoint[], now: number): number {
  let sum = 0;
  let n = 0;
  for (const e of list) {
    if (e.latency.samples === 0) continue;
    sum += e.latency.value(now);
    n++;
  }
  return n === 0 || sum === 0 ? 1 : sum / n;
}

/** Power of two choices (Mitzenmacher; Finagle's and Linkerd's balancer): of two endpoints drawn
 *  at random in proportion to weight, the cheaper (p2cCost) goes first — near least-loaded
 *  choices without herding every request onto one endpoint between load reports. An endpoint that
 *  must load the model first (a cold load takes seconds) is dearer than any that has it loaded.
 *  The rest follow cheapest first (failover). */
function p2c(state?: BalancingState): Order {
  return (routable, _key, model) => {
    const n = routable.length;
    if (n === 1) return routable;
    const now = performance.now();
    const peers = peersLatency(routable, now);
    const cold = (ep: Endpoint) => (model !== undefined && state?.cold(ep, model) ? 1 : 0);
    const cheaper = (x: Endpoint, y: Endpoint) => cold(x) - cold(y) || p2cCost(x, now, peers) - p2cCost(y, now, peers);
    const a = drawn(routable, -1);
    const b = drawn(routable, a);
    const first = cheaper(routable[b], routable[a]) < 0 ? b : a;
    const rest = routable.filter((_, i) => i !== first).sort(cheaper);
    return [routable[first], ...rest];
  };
}

/** An index drawn in proportion to weight, never `not`. */
function drawn(list: readonly Endpoint[], not: number): number {
  let total = 0;
  for (let i = 0; i < list.length; i++) if (i !== not) total += list[i].weight;
  let r = Math.random() * total;
  for (let i = 0; i < list.length; i++) {
    if (i === not) continue;
    r -= list[i].weight;
    if (r < 0) return i;
  }
  return not === list.length - 1 ? list.length - 2 : list.length - 1;
}

export const STRATEGIES: Record<string, (state?: BalancingState) => Order> = {
  priority,
  'round-robin': roundRobin,
  round_robin: roundRobin,
  'least-connections': leastConnections,
  least_conn: leastConnections,
  p2c,
};

/** 1 in N first places kept by a degraded endpoint while a Healthy one is a candidate; 0: none. */
export interface DegradedShares {
  busy: number;
  warming: number;
}

export interface BalancerSettings {
  shares: DegradedShares;
  /** Affinity keeps to endpoints that have the model loaded, when some have. */
  state?: BalancingState;
  /** proxy.affinity.max_load_factor; null: affinity off. */
  maxLoadFactor: number | null;
  /** Affinity chooses within the top priority (the priority strategy) rather than among all. */
  byPriority: boolean;
  /** Where conversations were placed away from their hash home (host-wide); absent: not kept. */
  placements?: Placements;
}

const isHealthy = (e: Endpoint) => e.state === 'healthy';
const notHealthy = (e: Endpoint) => e.state !== 'healthy';
const saturated = (e: Endpoint) => !!e.queue && !e.queue.hasFreeSlot;
const hasRoom = (e: Endpoint) => !saturated(e);
/** Asked for a pause at some time (cheap test first; the clock only when one did). */
const paused = (e: Endpoint) => e.coolingUntil > 0;

/** The endpoints affinity chooses among: the top priority's, or all. */
function equallyPreferred(list: readonly Endpoint[], byPriority: boolean): readonly Endpoint[] {
  if (!byPriority) return list;
  let top = -Infinity;
  for (const e of list) if (e.priority > top) top = e.priority;
  return list.every((e) => e.priority === top) ? list : list.filter((e) => e.priority === top);
}

/** The endpoints that have the model loaded, when some have and some must load it first (a
 *  model unloaded has lost its prompt cache too); else all. */
function loadedFirst(tier: readonly Endpoint[], model: string | undefined, state: BalancingState | undefined): readonly Endpoint[] {
  if (model === undefined || state === undefined || tier.length < 2) return tier;
  let cold = 0;
  for (const e of tier) if (state.cold(e, model)) cold++;
  return cold === 0 || cold === tier.length ? tier : tier.filter((e) => !state.cold(e, model));
}

/** The strategy's order with affinity, the state weights and capacity applied (see the top of this file). */
export function balancer(order: Order, s: BalancerSettings): Order {
  /** First places given to each degraded endpoint. */
  const offered = new WeakMap<Endpoint, number>();
  const placements = s.placements;
  return (list, key, model) => {
    let ordered: readonly Endpoint[];
    const affinity = key && s.maxLoadFactor !== null && list.length > 0;
    if (affinity) {
      const tier = loadedFirst(equallyPreferred(list, s.byPriority), model, s.state);
      const placed = (key.stored = placements?.get(key.id) ?? null) ?? undefined;
      if (tier.length === list.length) ordered = list.length > 1 ? rankKey(tier, key, s.maxLoadFactor!, performance.now(), placed) : list;
      else {
        const rest = order(list, null, model).filter((e) => !tier.includes(e));
        ordered = tier.length > 1 ? [...rankKey(tier, key, s.maxLoadFactor!, performance.now(), placed), ...rest] : [...tier, ...rest];
      }
      key.home ??= ordered[0];
    } else ordered = order(list, null, model);
    const first = ordered[0];
    if (first !== undefined && first.state !== 'healthy' && ordered.some(isHealthy)) {
      const every = first.state === 'busy' ? s.shares.busy : s.shares.warming;
      // A conversation's share is decided by its key, so the same 1 in N stay (and keep their
      // cache) rather than every conversation moving in and out.
      let n: number;
      if (key) n = (key.lo % (every || 1)) + 1;
      else offered.set(first, (n = (offered.get(first) ?? 0) + 1));
      if (every === 0 || n % every !== 0) ordered = [...ordered.filter(isHealthy), ...ordered.filter(notHealthy)];
    }
    if (ordered.length > 1 && ordered.some(saturated)) ordered = [...ordered.filter(hasRoom), ...ordered.filter(saturated)];
    if (ordered.length > 1 && ordered.some(paused)) {
      const now = performance.now();
      const waiting = (e: Endpoint) => e.cooling(now);
      if (ordered.some(waiting)) ordered = [...ordered.filter((e) => !waiting(e)), ...ordered.filter(waiting)];
    }
    // Remembered where the key's order was made (one candidate: nothing was decided).
    if (affinity && placements && key.hashed !== null) remember(placements, key, ordered[0]);
    return ordered;
  };
}

/** Where the conversation goes now, remembered when that is not the hash's choice; forgotten when
 *  it is again. */
function remember(placements: Placements, key: AffinityKey, first: Endpoint): void {
  if (first === key.hashed) {
    if (key.stored !== null) placements.place(key.id, first, true);
  } else if (first !== key.stored) placements.place(key.id, first, false);
}

const NO_KEY: AffinityNote = Object.freeze({ source: null, home: null, moved: null });

/** What affinity did: the key's home, and why the first of `ordered` is another — the home is
 *  out of rotation (one of `down` scores above every candidate; `byPriority`: only those of the
 *  top priority could be home), degraded, full, pausing, or past its load bound. */
export function noteOf(key: AffinityKey | null, ordered: readonly Endpoint[], down: readonly Endpoint[], byPriority: boolean): AffinityNote {
  if (key === null) return NO_KEY;
  let home = key.home;
  if (home === null) return { source: key.source, home: null, moved: null };
  let homeScore = score(key, home);
  let moved: string | null = null;
  // A conversation placed away from its hash home has its cache there, not at a home that is down.
  if (key.hashed === null || home === key.hashed)
    for (const d of down) {
      if (byPriority && d.priority < key.home!.priority) continue;
      const s = score(key, d);
      if (s > homeScore) {
        home = d;
        homeScore = s;
        moved = d.state;
      }
    }
  if (moved === null && ordered[0] !== home) {
    // The passes after placement moved it (state, capacity, pause), else the load did: an
    // opening turn sent to the least loaded, or the load bound.
    const h = home;
    moved =
      h.state !== 'healthy'
        ? h.state
        : saturated(h)
          ? 'no_free_slot'
          : h.cooling(performance.now())
            ? 'retry_after'
            : key.leastLoaded
              ? 'least_loaded'
              : 'overloaded';
  }
  return { source: key.source, home, moved };
}
