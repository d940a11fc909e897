// Model discovery: from each healthy endpoint at its model URL, at start, every interval, when an
// endpoint recovers, and on demand; a pool of workers, a timeout per endpoint, retries with
// exponential backoff. When an endpoint turns unroutable its list is invalidated (kept, so a
// model it served reads as unavailable rather than unknown, until the endpoint is rediscovered);
// lists not refreshed for 24 hours are dropped.
import { Agent, request } from 'undici';
import type { Logger } from 'pino';
import type { GatewayConfig } from '../core/config.js';
import { parseDuration } from '../core/duration.js';
import type { Endpoint } from './endpoints.js';
import type { EndpointRegistry } from './registry.js';
import { describeError } from './health.js';
import { SingleFlight } from './single-flight.js';
import type { Catalogue } from './catalogue.js';
import { ModelListError, parseModelList, type DiscoveredModel } from './model-lists.js';
import { ModelInfo } from './model-info.js';

const STALE_MS = 24 * 3_600_000;
const CLEANUP_MS = 10 * 60_000;
const RETRY_BASE_MS = 250;

export interface DiscoveryResult {
  endpoint: string;
  ok: boolean;
  models: number;
  error?: string;
}

export class DiscoveryService {
  enabled = false;
  intervalMs = 0;
  private timeoutMs = 0;
  private workers = 1;
  private attempts = 1;
  private readonly inFlight = new SingleFlight<Endpoint, DiscoveryResult>();
  private schedule: NodeJS.Timeout | null = null;
  private cleanup: NodeJS.Timeout | null = null;
  private readonly agent = new Agent({ keepAliveTimeout: 2_500, keepAliveMaxTimeout: 2_500 });
  /** Context windows the lists lack (the profile's api.model_info_path), cached by digest. */
  private readonly info = new ModelInfo(this.agent);
  private started = false;
  private stopped = false;
  /** Aborts the requests under way at shutdown: stopping never waits on a backend that hangs. */
  private readonly halt = new AbortController();

  constructor(
    private readonly registry: EndpointRegistry,
    private readonly catalogue: Catalogue,
    config: GatewayConfig,
    private readonly log: Logger,
  ) {
    this.configure(config);
    this.registry.on('recovered', (ep: Endpoint) => {
      if (this.started && this.enabled) void this.discover(ep);
    });
    this.registry.on('state', (ep: Endpoint) => {
      if (!ep.routable) this.catalogue.invalidate(ep);
    });
  }

  /** Take the settings of a (re)loaded configuration; a changed interval takes effect at once. */
  configure(config: GatewayConfig): void {
    const d = config.discovery.model_discovery;
    const interval = parseDuration(d.interval);
    const changed = d.enabled !== this.enabled || interval !== this.intervalMs;
    this.enabled = d.enabled;
    this.intervalMs = interval;
    this.timeoutMs = parseDuration(d.timeout);
    this.workers = d.concurrent_workers;
    this.attempts = d.retry_attempts;
    if (changed && this.started) this.arm();
  }

  /** First round over the healthy endpoints, then the schedule. */
  async start(): Promise<void> {
    this.started = true;
    if (this.enabled) await this.refresh();
    this.arm();
    this.cleanup = setInterval(() => {
      for (const ep of this.catalogue.sweep(STALE_MS)) this.log.info({ endpoint: ep.name }, 'model list stale; dropped');
    }, CLEANUP_MS).unref();
  }

  private arm(): void {
    if (this.schedule) clearInterval(this.schedule);
    this.schedule = this.enabled && !this.stopped ? setInterval(() => void this.refresh(), this.intervalMs).unref() : null;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.halt.abort();
    if (this.schedule) clearInterval(this.schedule);
    if (this.cleanup) clearInterval(this.cleanup);
    await this.inFlight.drain();
    await this.agent.close();
  }

  /** Discover from the given endpoints (default: every routable one), `workers` at a time. */
  async refresh(endpoints: readonly Endpoint[] = this.registry.all.filter((e) => e.routable)): Promise<DiscoveryResult[]> {
    if (!this.enabled) return [];
    const queue = [...endpoints];
    const results: DiscoveryResult[] = [];
    const worker = async () => {
      for (let ep = queue.shift(); ep; ep = queue.shift()) results.push(await this.discover(ep));
    };
    await Promise.all(Array.from({ length: Math.min(this.workers, queue.length) }, worker));
    return results;
  }

  /** One endpoint; a call while one runs joins it. */
  discover(ep: Endpoint): Promise<DiscoveryResult> {
    return this.inFlight.run(ep, () => this.fetchWithRetries(ep));
  }

  private async fetchWithRetries(ep: Endpoint): Promise<DiscoveryResult> {
    let error = '';
    for (let attempt = 0; attempt < this.attempts && !this.stopped; attempt++) {
      if (attempt > 0) await new Promise((r) => setTimeout(r, RETRY_BASE_MS * 2 ** (attempt - 1)).unref());
      try {
        const signal = AbortSignal.any([this.halt.signal, AbortSignal.timeout(this.timeoutMs)]);
        const res = await request(ep.modelUrl, { headers: ep.headers as string[], signal, dispatcher: this.agent });
        if (res.statusCode !== 200) {
          await res.body.dump();
          throw new ModelListError(`model list answered ${res.statusCode}`);
        }
        const gone = () => this.stopped || !ep.routable;
        const listed = parseModelList(await res.body.json(), ep.profile.request.response_format);
        if (gone()) return { endpoint: ep.name, ok: false, models: 0, error: 'endpoint no longer routable' };
        const models = await this.withContexts(ep, listed, signal, gone);
        if (gone()) return { endpoint: ep.name, ok: false, models: 0, error: 'endpoint no longer routable' };
        this.catalogue.set(ep, models);
        this.log.debug({ endpoint: ep.name, models: models.length }, 'models discovered');
        return { endpoint: ep.name, ok: true, models: models.length };
      } catch (err) {
        error = err instanceof ModelListError ? err.message : err instanceof SyntaxError ? 'model list is not JSON' : describeError(err);
      }
    }
    this.log.warn({ endpoint: ep.name, error }, 'model discovery failed');
    return { endpoint: ep.name, ok: false, models: this.catalogue.listOf(ep)?.length ?? 0, error };
  }

  /** Where the profile names a model-info path, the context windows the list lacks: known
   *  digests from the cache, the rest asked within what is left of this attempt's time. The
   *  list is published first, so routing never waits on these. */
  private async withContexts(ep: Endpoint, listed: DiscoveredModel[], signal: AbortSignal, gone: () => boolean): Promise<DiscoveredModel[]> {
    const path = ep.profile.api.model_info_path;
    if (!path) return listed;
    const { models, missing } = this.info.fromCache(ep, listed);
    if (missing.length === 0) return models;
    if (!gone()) this.catalogue.set(ep, models);
    const { learnt, errors } = await this.info.fetch(ep, path, missing, signal);
    if (errors.length)
      this.log.debug(
        { endpoint: ep.name, errors: errors.slice(0, 5), failed: errors.length },
        'model info not read; the profile patterns apply until the next discovery',
      );
    return learnt ? this.info.fromCache(ep, listed).models : models;
  }
}
