// Every fact the gateway keeps about its backends and traffic, and where it is kept: the one full
// list. docs/architecture.md ("State scopes") shows this table and a test holds the two together.
// - process: each process keeps its own (each worker, each replica);
// - host: kept once per host and shared by its workers through the host process (a gateway of one
//   process is its own host: sharing/host.ts);
// - fleet: shared by every replica through Redis when server.rate_limits.store is redis
//   (sharing/fleet.ts), else kept by each host;
// - request: nothing outlives the request (or it is computed alike everywhere).
// The choice is made once, where the backends' state is built (state.ts): by the host scope it is
// given and its fleet, never branched on where a fact is used.
export type Scope = 'request' | 'process' | 'host' | 'fleet';

export interface ScopedFact {
  /** What is kept, as the docs name it. */
  readonly fact: string;
  readonly scope: Scope;
  /** Where it is kept: the files that keep it, from the repository's root. */
  readonly where: string;
}

export const STATE_SCOPES: readonly ScopedFact[] = [
  { fact: 'health checks and endpoint states', scope: 'host', where: 'engine/backends/health.ts' },
  { fact: 'model catalogue (discovery)', scope: 'host', where: 'engine/backends/discovery.ts, engine/backends/catalogue.ts' },
  { fact: 'models loaded (residency)', scope: 'host', where: 'engine/backends/residency.ts' },
  { fact: 'engine load reports', scope: 'host', where: 'engine/backends/engine-load.ts' },
  { fact: 'breaker failure counts', scope: 'host', where: 'engine/backends/breaker.ts' },
  { fact: 'breaker openings by requests', scope: 'fleet', where: 'engine/backends/breaker.ts, engine/backends/sharing/shared-evidence.ts' },
  { fact: 'Retry-After pauses', scope: 'fleet', where: 'engine/backends/endpoints.ts, engine/backends/sharing/shared-evidence.ts' },
  { fact: 'concurrency limits, queues and slots', scope: 'host', where: 'engine/backends/queue.ts' },
  {
    fact: 'rate limits: global, per address, internal routes',
    scope: 'fleet',
    where: 'engine/backends/rate-buckets.ts, engine/backends/sharing/redis-buckets.ts',
  },
  { fact: "API keys' own request limits", scope: 'fleet', where: 'engine/backends/rate-buckets.ts, plugins/authenticate.ts' },
  {
    fact: "API keys' usage and token limits (and reservations in flight)",
    scope: 'fleet',
    where: 'engine/backends/usage-ledger.ts, engine/backends/sharing/redis-usage.ts, engine/backends/usage-file.ts',
  },
  { fact: 'rate limit of the health routes', scope: 'process', where: 'engine/backends/rate-buckets.ts' },
  { fact: 'per-endpoint requests-per-minute limits', scope: 'process', where: 'engine/backends/rate-buckets.ts' },
  { fact: 'retry budget (proxy.retry.fleet)', scope: 'process', where: 'engine/backends/retry-budget.ts' },
  { fact: 'requests in flight (balancing)', scope: 'process', where: 'engine/backends/endpoints.ts' },
  { fact: 'latency (p2c balancing)', scope: 'process', where: 'engine/backends/peak-ewma.ts' },
  { fact: 'times to first token (learned first-token deadline)', scope: 'process', where: 'engine/backends/first-tokens.ts' },
  { fact: 'prefills an engine refused (continuation restarts)', scope: 'process', where: 'engine/backends/endpoints.ts' },
  { fact: 'conversation affinity (the hash)', scope: 'request', where: 'plugins/routing/affinity.ts' },
  { fact: 'conversations placed away from their hash home', scope: 'host', where: 'engine/backends/placements.ts' },
  { fact: 'stream continuation (the answer so far)', scope: 'request', where: 'engine/routing/continuation.ts' },
  { fact: 'Responses API store (previous_response_id)', scope: 'process', where: 'plugins/apis/responses/store.ts' },
  { fact: 'counters of the status routes', scope: 'process', where: 'engine/backends/telemetry.ts' },
  { fact: 'metrics series', scope: 'process', where: 'engine/backends/metrics.ts' },
  { fact: 'configuration reloads', scope: 'host', where: 'engine/kernel/reload.ts' },
];
