// What a compiled graph runs against: the configuration it was built from, and the services
// that outlive it (the backends' state, the logger, the reload status). A reload builds a new
// graph against a new Runtime that shares those services.
import type { Logger } from 'pino';
import type { Backends } from '../backends/state.js';
import type { Catalogue } from '../backends/catalogue.js';
import type { DiscoveryService } from '../backends/discovery.js';
import type { Health } from '../backends/health.js';
import type { EndpointRegistry } from '../backends/registry.js';
import type { Metrics } from '../backends/metrics.js';
import type { RateBuckets } from '../backends/rate-buckets.js';
import type { UsageBooks } from '../backends/usage-books.js';
import type { Residency } from '../backends/residency.js';
import type { Placements } from '../backends/placements.js';
import type { RetryBudget } from '../backends/retry-budget.js';
import type { Stats } from '../backends/telemetry.js';
import type { GatewayTracer } from '../backends/tracing.js';
import type { GatewayConfig } from '../core/config.js';
import type { ProfileSet } from '../core/profiles.js';

/** What /internal/status shows of hot reload. */
export interface ReloadStatus {
  /** Graphs built so far: 1 at start, +1 per successful reload. */
  generation: number;
  last_attempt: string | null;
  ok: boolean;
  error: string | null;
}

export interface Runtime {
  config: GatewayConfig;
  /** The config file, or "(built-in default)". */
  source: string;
  profiles: ProfileSet;
  endpoints: EndpointRegistry;
  health: Health;
  catalogue: Catalogue;
  discovery: DiscoveryService;
  /** Which models each endpoint has loaded now: `residency.isLoaded(ep, model)`, undefined when unknown. */
  residency: Residency;
  /** Where conversations were placed away from their hash home (conversation affinity), host-wide. */
  placements: Placements;
  stats: Stats;
  metrics: Metrics;
  /** The OpenTelemetry tracer while tracing is on (tracing, OTEL_*); null while off. */
  tracer: GatewayTracer | null;
  /** The rate limits' token buckets (server.rate_limits), shared by every route. */
  buckets: RateBuckets;
  /** The fleet's retry budget (proxy.retry.fleet), shared by every route. */
  retries: RetryBudget;
  /** Tokens used per key and the keys' token limits: this process's ledger or the host's. */
  usage: UsageBooks;
  log: Logger;
  version: string;
  startedAt: Date;
  reload: Readonly<ReloadStatus>;
  /** The counters of the whole host: this process's, or with workers every worker's summed
   *  (the status routes; requests never ask). */
  hostStats(): Promise<Stats>;
  /** This worker's number under gw serve --workers N; null for a gateway of one process. */
  worker: number | null;
}

export function runtimeOf(o: {
  config: GatewayConfig;
  source: string;
  profiles: ProfileSet;
  backends: Backends;
  log: Logger;
  version: string;
  startedAt: Date;
  reload: ReloadStatus;
}): Runtime {
  const { backends } = o;
  return {
    config: o.config,
    source: o.source,
    profiles: o.profiles,
    log: o.log,
    version: o.version,
    startedAt: o.startedAt,
    reload: o.reload,
    endpoints: backends.endpoints,
    health: backends.health,
    catalogue: backends.catalogue,
    discovery: backends.discovery,
    residency: backends.residency,
    placements: backends.placements,
    stats: backends.stats,
    metrics: backends.metrics,
    tracer: backends.tracing.tracer,
    buckets: backends.buckets,
    retries: backends.retries,
    usage: backends.usage,
    hostStats: () => backends.host.stats(backends.stats, backends.endpoints.all),
    worker: backends.host.worker,
  };
}
