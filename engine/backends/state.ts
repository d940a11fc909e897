// The backends' state: endpoints (by id) with their pools and breakers, health, the model
// catalogue, discovery and the counters. It outlives every compiled graph: a reload reconciles it
// with the new configuration instead of rebuilding it, so nothing healthy goes back to Unknown.
import type { Logger } from 'pino';
import type { GatewayConfig } from '../core/config.js';
import { parseDuration } from '../core/duration.js';
import { Catalogue } from './catalogue.js';
import { DiscoveryService } from './discovery.js';
import { EngineLoad } from './engine-load.js';
import { EngineReports } from './engine-reports.js';
import type { EndpointPlan } from './endpoint-plans.js';
import { HealthMonitor } from './health.js';
import { EndpointRateGate, RateBuckets } from './rate-buckets.js';
import { EndpointRegistry, type Reconciled } from './registry.js';
import { Metrics } from './metrics.js';
import { Residency } from './residency.js';
import { RetryBudget, type RetryBudgetSettings } from './retry-budget.js';
import { SharedEvidence } from './shared-evidence.js';
import type { WorkerLink } from './host-link.js';
import { Stats } from './telemetry.js';

export class Backends {
  readonly endpoints: EndpointRegistry;
  readonly health: HealthMonitor;
  readonly catalogue: Catalogue;
  readonly discovery: DiscoveryService;
  /** Which models each endpoint has loaded now (residency.isLoaded): the cold first-token deadline. */
  readonly residency: Residency;
  /** What each engine reports it is running (endpoint.load): balancing counts others' requests too. */
  readonly engineLoad: EngineLoad;
  private readonly reports = new EngineReports();
  readonly stats = new Stats();
  /** The Prometheus registry (/internal/metrics): its series outlive reloads like the counters. */
  readonly metrics = new Metrics();
  /** The rate limits' buckets (server.rate_limits): kept across reloads like everything here. */
  readonly buckets: RateBuckets;
  /** The fleet's retry budget (proxy.retry.fleet): survives reloads, like the traffic it counts. */
  readonly retries: RetryBudget;
  /** Breaker openings and pauses shared with the other replicas (with the rate limits in Redis). */
  evidence: SharedEvidence | null = null;

  /** `clock`: milliseconds, monotonic; the rate limits' time (tests pass one they move by hand).
   *  `link`: a worker's link to its host (gw serve --workers N), which keeps what is host-wide:
   *  health checks, discovery and engine reports run there, rate limits and queues are its. */
  constructor(config: GatewayConfig, plans: readonly EndpointPlan[], private readonly log: Logger, clock: () => number = () => performance.now(), readonly link: WorkerLink | null = null) {
    this.buckets = new RateBuckets(config.server.rate_limits.max_tracked_clients, clock, log, () => this.stats.rateLimitStoreFailures++, link?.buckets ?? null);
    this.retries = new RetryBudget(fleetOf(config));
    this.endpoints = new EndpointRegistry({
      markFailed: (ep, reason) => this.health.markFailed(ep, reason),
      markAnswered: (ep, status) => this.health.markAnswered(ep, status),
    }, link ? (ep, settings) => link.queue(ep, settings) : undefined);
    this.catalogue = new Catalogue(() => this.endpoints.all);
    this.residency = new Residency(this.endpoints, this.catalogue, this.reports, log);
    this.engineLoad = new EngineLoad(this.endpoints, this.reports, log);
    this.health = new HealthMonitor(this.endpoints, log, (ep) => {
      void this.residency.refresh(ep);
      void this.engineLoad.refresh(ep);
    }, link);
    this.discovery = new DiscoveryService(this.endpoints, this.catalogue, config, log, link && { refresh: () => link.refresh() });
    this.reconcile(config, plans);
    if (link) {
      link.attach(this);
      this.metrics.offerToHost(() => link.metrics());
    }
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
    if (r.added.length) this.link?.resync();
    this.discovery.configure(config);
    this.buckets.configure(config.server.rate_limits);
    this.shareEvidence();
    this.retries.configure(fleetOf(config));
    // A kept endpoint keeps its bucket (by id); a changed rate applies from its next request.
    for (const ep of this.endpoints.all) ep.rateGate = ep.rate ? new EndpointRateGate(this.buckets.stores.endpoint, ep.id, ep.rate) : null;
    return r;
  }

  /** With the rate limits in Redis, breaker openings and Retry-After pauses go through it too:
   *  what one replica's requests learn spares the others (shared-evidence.ts). */
  private shareEvidence(): void {
    const settings = this.buckets.shared?.settings;
    if (settings !== this.evidence?.settings) {
      this.evidence?.close();
      this.evidence = settings
        ? new SharedEvidence(settings, this.log, (e) => {
            const ep = this.endpoints.get(e.id);
            if (!ep || ep.retired) return;
            if (e.kind === 'open') ep.breaker.openElsewhere(e.ms);
            else ep.pausedElsewhere(e.ms);
          })
        : null;
    }
    const { evidence, link } = this;
    const shared = evidence || link;
    for (const ep of this.endpoints.all) {
      ep.breaker.onProxyOpen = shared ? (ms) => (evidence?.publish({ id: ep.id, kind: 'open', ms }), link?.opened(ep, ms)) : null;
      ep.onPause = shared ? (ms) => (evidence?.publish({ id: ep.id, kind: 'pause', ms }), link?.paused(ep, ms)) : null;
      ep.breaker.onCount = link ? (failed) => link.counted(ep, failed) : null;
    }
  }

  /** The first health round and discovery; then each on its schedule. */
  async start(): Promise<void> {
    if (this.link) await this.link.start();
    else {
      await this.health.start();
      await this.discovery.start();
    }
    this.stats.observeGc();
  }

  async stop(): Promise<void> {
    await this.health.stop();
    await this.reports.stop();
    await this.discovery.stop();
    this.stats.stopObserving();
    this.buckets.close();
    this.link?.buckets.close();
    this.evidence?.close();
    this.evidence = null;
    await this.endpoints.close();
  }
}

function fleetOf(config: GatewayConfig): RetryBudgetSettings {
  const f = config.proxy.retry.fleet;
  return { ratio: f.ratio, minPerSecond: f.min_per_second, windowMs: parseDuration(f.window) };
}
