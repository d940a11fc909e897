// The order candidates are tried in, in three passes over the routable endpoints:
// 1. the balancing strategy: priority, round-robin, least-connections;
// 2. state weights: a Busy or Warming endpoint keeps only 1 in N of the first places the strategy
//    gives it while a Healthy endpoint is among the candidates (proxy.degraded_traffic); the other
//    first places go to the Healthy ones. Counted per endpoint, no randomness: shares are exact;
// 3. capacity: endpoints with a free slot (or no concurrency limit) before those whose every slot
//    is held, so a request queues only where no candidate can take it now;
// 4. pauses: an endpoint whose last 429 or 503 asked to wait (Retry-After) comes last until the
//    wait is over: it is tried only when nothing better is left.
import type { Endpoint } from '../../engine/backends/endpoints.js';

export type Order = (routable: readonly Endpoint[]) => readonly Endpoint[];

const byPriority = (a: Endpoint, b: Endpoint) => b.priority - a.priority;

/** Highest priority first; endpoints sharing the top priority take turns. */
function priority(): Order {
  let turn = 0;
  return (routable) => {
    if (routable.length === 1) return routable;
    const sorted = [...routable].sort(byPriority);
    let tier = 1;
    while (tier < sorted.length && sorted[tier].priority === sorted[0].priority) tier++;
    if (tier > 1) {
      const k = turn++ % tier;
      return [...sorted.slice(k, tier), ...sorted.slice(0, k), ...sorted.slice(tier)];
    }
    return sorted;
  };
}

/** Each request starts one endpoint further along; failover continues around the ring. */
function roundRobin(): Order {
  let turn = 0;
  return (routable) => {
    const n = routable.length;
    if (n === 1) return routable;
    const k = turn++ % n;
    return [...routable.slice(k), ...routable.slice(0, k)];
  };
}

/** Fewest requests in flight first; ties go to the higher priority, then configuration order. */
function leastConnections(): Order {
  return (routable) => (routable.length === 1 ? routable : [...routable].sort((a, b) => a.active - b.active || byPriority(a, b)));
}

export const STRATEGIES: Record<string, () => Order> = {
  priority,
  'round-robin': roundRobin,
  round_robin: roundRobin,
  'least-connections': leastConnections,
  least_conn: leastConnections,
};

/** 1 in N first places kept by a degraded endpoint while a Healthy one is a candidate; 0: none. */
export interface DegradedShares {
  busy: number;
  warming: number;
}

const isHealthy = (e: Endpoint) => e.state === 'healthy';
const notHealthy = (e: Endpoint) => e.state !== 'healthy';
const saturated = (e: Endpoint) => !!e.queue && !e.queue.hasFreeSlot;
const hasRoom = (e: Endpoint) => !saturated(e);
/** Asked for a pause at some time (cheap test first; the clock only when one did). */
const paused = (e: Endpoint) => e.coolingUntil > 0;

/** The strategy's order with the state weights and capacity applied (see the top of this file). */
export function balancer(order: Order, shares: DegradedShares): Order {
  /** First places the strategy gave each degraded endpoint. */
  const offered = new WeakMap<Endpoint, number>();
  return (list) => {
    let ordered = order(list);
    const first = ordered[0];
    if (first !== undefined && first.state !== 'healthy' && ordered.some(isHealthy)) {
      const every = first.state === 'busy' ? shares.busy : shares.warming;
      const n = (offered.get(first) ?? 0) + 1;
      offered.set(first, n);
      if (every === 0 || n % every !== 0) ordered = [...ordered.filter(isHealthy), ...ordered.filter(notHealthy)];
    }
    if (ordered.length > 1 && ordered.some(saturated)) ordered = [...ordered.filter(hasRoom), ...ordered.filter(saturated)];
    if (ordered.length > 1 && ordered.some(paused)) {
      const now = performance.now();
      const waiting = (e: Endpoint) => {
        if (e.cooling(now)) return true;
        e.coolingUntil = 0; // over: the next request need not read the clock for it
        return false;
      };
      if (ordered.some(waiting)) ordered = [...ordered.filter((e) => !waiting(e)), ...ordered.filter(waiting)];
    }
    return ordered;
  };
}
