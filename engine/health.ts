// Health checking: each endpoint on its own interval and timeout, one check in flight at a time.
// The first check moves Unknown to Healthy or Unhealthy; only routable endpoints get traffic.
import { request } from 'undici';
import type { Logger } from 'pino';
import type { Endpoint, EndpointRegistry } from './endpoints.js';

export class HealthMonitor {
  private readonly timers = new Map<Endpoint, NodeJS.Timeout>();
  private readonly inFlight = new Map<Endpoint, Promise<void>>();
  private stopped = false;

  constructor(private readonly registry: EndpointRegistry, private readonly log: Logger) {}

  /** Check every endpoint once (in parallel), then keep checking each on its own interval. */
  async start(): Promise<void> {
    await Promise.all(this.registry.all.map((ep) => this.check(ep)));
    for (const ep of this.registry.all) this.schedule(ep);
  }

  stop(): void {
    this.stopped = true;
    for (const t of this.timers.values()) clearTimeout(t);
    this.timers.clear();
  }

  /** A proxied request hit a connection error: take the endpoint out of rotation at once. */
  markFailed(ep: Endpoint, reason: string): void {
    ep.consecutiveFailures++;
    ep.lastError = reason;
    this.registry.setState(ep, 'unhealthy', reason);
  }

  private schedule(ep: Endpoint): void {
    if (this.stopped) return;
    const t = setTimeout(() => {
      void this.check(ep).finally(() => this.schedule(ep));
    }, ep.checkIntervalMs);
    t.unref();
    this.timers.set(ep, t);
  }

  /** One check; a second call while one runs joins it instead of piling up. */
  check(ep: Endpoint): Promise<void> {
    let running = this.inFlight.get(ep);
    if (!running) {
      running = this.probe(ep).finally(() => this.inFlight.delete(ep));
      this.inFlight.set(ep, running);
    }
    return running;
  }

  private async probe(ep: Endpoint): Promise<void> {
    const started = performance.now();
    let ok = false;
    let reason = '';
    try {
      const res = await request(ep.healthUrl, {
        method: 'GET',
        headers: ep.headers as string[],
        signal: AbortSignal.timeout(ep.checkTimeoutMs),
        dispatcher: ep.healthUrl.startsWith(ep.origin) ? ep.pool : undefined,
      });
      await res.body.dump();
      ok = res.statusCode >= 200 && res.statusCode < 300;
      if (!ok) reason = `health check answered ${res.statusCode}`;
    } catch (err) {
      reason = describeError(err);
    }
    ep.lastCheck = new Date();
    ep.lastLatencyMs = performance.now() - started;
    if (ok) {
      ep.consecutiveFailures = 0;
      ep.lastError = '';
      if (ep.state !== 'healthy') this.log.info({ endpoint: ep.name, from: ep.state }, 'endpoint healthy');
      this.registry.setState(ep, 'healthy');
    } else {
      ep.consecutiveFailures++;
      ep.lastError = reason;
      if (ep.state !== 'unhealthy') this.log.warn({ endpoint: ep.name, from: ep.state, reason }, 'endpoint unhealthy');
      this.registry.setState(ep, 'unhealthy', reason);
    }
  }
}

/** A short reason without URLs or credentials. */
export function describeError(err: unknown): string {
  const e = err as { code?: string; name?: string; cause?: { code?: string } };
  if (e?.name === 'TimeoutError' || e?.name === 'AbortError') return 'timed out';
  return e?.code ?? e?.cause?.code ?? e?.name ?? 'error';
}
