// The backends' state: endpoints (by id) with their pools and breakers, health, the model
// catalogue, discovery and the counters. It outlives every compiled graph: a reload reconciles it
// with the new configuration instead of rebuilding it, so nothing healthy goes back to Unknown.
// Where each fact is kept — this process, the host, the fleet (sharing/scopes.ts) — is decided
// here, once: by the host scope it is built with (its own, or a worker's link to its host) and
// the fleet (the replicas' Redis, when configured).
import type { Logger } from 'pino';
import type { GatewayConfig } from '../core/config.js';
import { parseDuration } from '../core/duration.js';
import { Catalogue } from './catalogue.js';
import type { DiscoveryService } from './discovery.js';
import { EngineLoad } from './engine-load.js';
import { EngineReports } from './engine-reports.js';
import type { Endpoint } from './endpoints.js';
import type { EndpointPlan } from './endpoint-plans.js';
import type { Health } from './health.js';
import { EndpointRateGate, RateBuckets } from './rate-buckets.js';
import { EndpointRegistry, type Reconciled } from './registry.js';
import { Metrics } from './metrics.js';
import { Placements } from './placements.js';
import { Residency } from './residency.js';
import { RetryBudget, type RetryBudgetSettings } from './retry-budget.js';
import { Fleet, type Evidence } from './sharing/fleet.js';
import { OwnHost, type HostScope } from './sharing/host.js';
import { Stats } from './telemetry.js';
import { Tracing } from './tracing.js';
import { LocalBooks, type UsageBooks } from './usage-books.js';
import { defaultUsageFile, UsageFile } from './usage-file.js';
import { UsageLedger } from './usage-ledger.js';

export class Backends {
  readonly endpoints: EndpointRegistry;
  readonly health: Health;
  readonly catalogue: Catalogue;
  readonly discovery: DiscoveryService;
  /** Which models each endpoint has loaded now (residency.isLoaded): the cold first-token deadline. */
  readonly residency: Residency;
  /** What each engine reports it is running (endpoint.load): balancing counts others' requests too. */
  readonly engineLoad: EngineLoad;
  /** Where conversations were placed away from their hash home (affinity), host-wide. */
  readonly placements = new Placements();
  private readonly reports = new EngineReports();
  readonly stats = new Stats();
  /** The Prometheus registry (/internal/metrics): its series outlive reloads like the counters. */
  readonly metrics = new Metrics();
  /** OpenTelemetry tracing (tracing, OTEL_*): set up again by each (re)load, before its graph. */
  readonly tracing: Tracing;
  /** The rate limits' buckets (server.rate_limits): kept across reloads like everything here. */
  readonly buckets: RateBuckets;
  /** Tokens used per key and the keys' token limits (auth.keys[]), where they are kept: the
   *  fleet's Redis when the limits are shared, else the host's ledger (this process's, or a
   *  worker's host's). */
  get usage(): UsageBooks {
    return this.fleet.usage ?? this.hostBooks;
  }
  private readonly hostBooks: UsageBooks;
  private usageFile: UsageFile | null = null;
  private started = false;
  /** The fleet's retry budget (proxy.retry.fleet): survives reloads, like the traffic it counts. */
  readonly retries: RetryBudget;
  /** What the replicas share through Redis, when configured: rate buckets, breaker evidence. */
  readonly fleet: Fleet;

  /** `clock`: milliseconds, monotonic; the rate limits' time (tests pass one they move by hand).
   *  `host`: where what is host-wide is kept — this process (a gateway of one process), or the
   *  host process of a worker of gw serve --workers N (its WorkerLink). */
  constructor(
    config: GatewayConfig,
    plans: readonly EndpointPlan[],
    private readonly log: Logger,
    clock: () => number = () => performance.now(),
    readonly host: HostScope = new OwnHost(),
  ) {
    this.tracing = new Tracing(log);
    this.fleet = new Fleet(
      log,
      () => this.stats.rateLimitStoreFailures++,
      (e) => this.evidence(e),
    );
    this.buckets = new RateBuckets(config.server.rate_limits.max_tracked_clients, clock, host.buckets, this.fleet);
    this.hostBooks = host.usageBooks(new UsageLedger());
    this.retries = new RetryBudget(fleetOf(config));
    this.endpoints = new EndpointRegistry(
      {
        markFailed: (ep, reason) => this.health.markFailed(ep, reason),
        markAnswered: (ep, status) => this.health.markAnswered(ep, status),
      },
      (ep, settings) => host.queue(ep, settings),
    );
    this.catalogue = new Catalogue(() => this.endpoints.all);
    this.residency = new Residency(this.endpoints, this.catalogue, this.reports, log);
    this.engineLoad = new EngineLoad(this.endpoints, this.reports, log);
    this.health = host.health(this.endpoints, log, (ep) => {
      void this.residency.refresh(ep);
      void this.engineLoad.refresh(ep);
    });
    this.discovery = host.discovery(this.endpoints, this.catalogue, config, log);
    this.placements.onPlaced = (key, ep, home) => host.placed(ep, key, home);
    this.reconcile(config, plans);
    host.attach(this);
  }

  /** Apply a configuration: endpoints kept, added (checked at once) or retired; settings updated. */
  reconcile(config: GatewayConfig, plans: readonly EndpointPlan[]): Reconciled {
    const b = config.proxy.circuit_breaker;
    const breaker = {
      healthFailures: b.health_failures,
      proxyFailures: b.proxy_failures,
      initialOpenMs: parseDuration(b.initial_open_timeout),
      maxOpenMs: parseDuration(b.open_timeout),
      jitter: b.jitter,
    };
    const r = this.endpoints.reconcile(plans, breaker);
    this.catalogue.reconcile(r.removed);
    for (const ep of r.removed) {
      this.residency.forget(ep);
      this.engineLoad.forget(ep);
    }
    this.health.reconcile(r);
    if (r.added.length) this.host.added();
    this.discovery.configure(config);
    this.buckets.configure(config.server.rate_limits);
    this.fleet.configure(config.server.rate_limits);
    this.retries.configure(fleetOf(config));
    if (this.started) this.keepUsage(config);
    for (const ep of this.endpoints.all) {
      // A kept endpoint keeps its bucket (by id); a changed rate applies from its next request.
      ep.rateGate = ep.rate ? new EndpointRateGate(this.buckets.stores.endpoint, ep.id, ep.rate) : null;
      this.share(ep);
    }
    return r;
  }

  /** The usage ledger on disk (auth.usage_file), where this process keeps the ledger (not a
   *  worker: its host does), from when keys are first on. */
  private keepUsage(config: GatewayConfig): void {
    if (!(this.hostBooks instanceof LocalBooks) || config.auth.keys.length === 0) return;
    const path = config.auth.usage_file ?? defaultUsageFile(config.server.port);
    if (this.usageFile) this.usageFile.path = path;
    else this.usageFile = new UsageFile(this.hostBooks.ledger, path, this.log);
  }

  /** What an endpoint's requests learn goes to whoever shares it: the host's other workers (a
   *  breaker's counts and openings, Retry-After pauses) and the fleet's other replicas (openings
   *  and pauses); each does nothing where there is nobody to tell. */
  private share(ep: Endpoint): void {
    const { host, fleet } = this;
    ep.breaker.onProxyOpen = (ms) => {
      fleet.publish({ id: ep.id, kind: 'open', ms });
      host.opened(ep, ms);
    };
    ep.onPause = (ms) => {
      fleet.publish({ id: ep.id, kind: 'pause', ms });
      host.paused(ep, ms);
    };
    ep.breaker.onCount = (failed, answer) => host.counted(ep, failed, answer);
  }

  /** What another replica's requests learnt about an endpoint (fleet.ts). */
  private evidence(e: Evidence): void {
    const ep = this.endpoints.get(e.id);
    if (!ep || ep.retired) return;
    if (e.kind === 'open') ep.breaker.openElsewhere(e.ms);
    else ep.pausedElsewhere(e.ms);
  }

  /** The first health round and discovery (a worker takes its host's instead); then each on its schedule. */
  async start(config: GatewayConfig): Promise<void> {
    this.started = true;
    this.keepUsage(config);
    await this.host.start();
    await this.health.start();
    await this.discovery.start();
    this.stats.observeGc();
  }

  async stop(): Promise<void> {
    await this.tracing.stop();
    await this.health.stop();
    await this.reports.stop();
    await this.discovery.stop();
    this.stats.stopObserving();
    this.usageFile?.close();
    this.fleet.close();
    this.host.close();
    await this.endpoints.close();
  }
}

function fleetOf(config: GatewayConfig): RetryBudgetSettings {
  const f = config.proxy.retry.fleet;
  return { ratio: f.ratio, minPerSecond: f.min_per_second, windowMs: parseDuration(f.window) };
}
