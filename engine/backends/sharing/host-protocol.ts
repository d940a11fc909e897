// What the host (node:cluster's primary, which keeps the host-wide state: health checks, discovery,
// engine reports, rate-limit buckets, concurrency queues) and its workers (which serve) say to each
// other over the cluster's IPC channel. Every message carries `gw`, so prom-client's own cluster
// messages (metrics aggregation) pass by untouched.
import type { HealthState } from '../endpoints.js';
import type { DiscoveredModel } from '../model-lists.js';
import type { StatsSnapshot } from '../telemetry.js';
import type { QueueCounts } from '../queue.js';
import type { SharedTake } from '../token-bucket.js';
import type { Budget, Spent } from '../usage-ledger.js';

/** One endpoint's health as the host's checks left it. `check`: this observation is a health
 *  check's verdict ('fail' counts towards the breaker's health failures, 'pass' is a passing one). */
export interface HealthObservation {
  id: string;
  state: HealthState;
  reason: string;
  lastCheck: number | null;
  lastLatencyMs: number;
  consecutiveFailures: number;
  checksTotal: number;
  checksPassed: number;
  nextCheckAt: number | null;
  check?: 'pass' | 'fail';
}

/** An engine's load report, its times relative to when it was sent (the processes' clocks differ).
 *  The host serves no requests: each worker counts as others what the engine runs beyond the
 *  host's requests in flight, taken as its own times the `workers` (new connections go to the
 *  workers in turn). */
export interface LoadObservation {
  running: number;
  waiting: number;
  workers: number;
  path: string;
  ageMs: number;
  ttlMs: number;
  readAt: number;
}

/** What a worker asks and waits for. */
export type Question =
  | { what: 'state' }
  | { what: 'take'; takes: SharedTake[] }
  | { what: 'acquire'; id: string; model: string }
  | { what: 'refresh' }
  | { what: 'stats' }
  | { what: 'metrics' }
  | { what: 'admit'; budget: Budget; tokens: number }
  | { what: 'usage'; budgets: Budget[]; only?: string };

/** What a status route asks of the host: every worker's counters, and the host's queues'. */
export type HostCounters = { workers: StatsSnapshot[]; queues: [id: string, counts: QueueCounts][] };

export type { TakeAnswer } from '../token-bucket.js';

/** Host → worker. */
export type ToWorker =
  | { gw: 'health'; o: HealthObservation }
  | { gw: 'models'; id: string; list: { models: DiscoveredModel[]; at: number; stale: boolean } | null }
  | { gw: 'resident'; id: string; entries: [string, boolean][] | null }
  | { gw: 'load'; id: string; report: LoadObservation | null }
  /** Evidence another worker's requests found (relayed): a breaker count, an opening, a pause. */
  | { gw: 'count'; id: string; failed: boolean; answer?: string }
  | { gw: 'open'; id: string; ms: number }
  | { gw: 'pause'; id: string; ms: number }
  /** A conversation placed on endpoint `id` away from its hash home, or back at it (affinity). */
  | { gw: 'place'; id: string; key: number; home: boolean }
  | { gw: 'answer'; n: number; value: unknown }
  | { gw: 'reload'; reason: string }
  /** The host gathers every worker's counters (a status route asked) or series (/internal/metrics). */
  | { gw: 'gather'; n: number; what: 'snapshot' | 'series' };

/** Worker → host. */
export type ToHost =
  | { gw: 'ask'; n: number; q: Question }
  | { gw: 'failed'; id: string; reason: string }
  | { gw: 'answered'; id: string; status: number }
  | { gw: 'check'; id: string }
  | { gw: 'count'; id: string; failed: boolean; answer?: string }
  | { gw: 'open'; id: string; ms: number }
  | { gw: 'pause'; id: string; ms: number }
  | { gw: 'place'; id: string; key: number; home: boolean }
  /** A slot the host granted (ask acquire) is given back after `heldMs`. */
  | { gw: 'release'; id: string; heldMs: number; model: string }
  /** The waiter of ask `n` (acquire) went away. */
  | { gw: 'leave'; n: number }
  /** Leased rate-limit tokens not used, given back to their buckets. */
  | { gw: 'giveBack'; tokens: [scope: string, key: string, count: number][] }
  | { gw: 'gathered'; n: number; value: unknown }
  /** A request is over: its token reservation (0: none) settles on what it used. */
  | { gw: 'settle'; id: number; spent: Spent | null };

export const isGw = (m: unknown): m is { gw: string } => typeof m === 'object' && m !== null && typeof (m as { gw?: unknown }).gw === 'string';
