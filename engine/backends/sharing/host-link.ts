// A worker's link to its host (gw serve --workers N). The host keeps what is host-wide; the worker
// applies what the host observed and asks for what it decides:
//  - health, model lists and engine reports arrive as observations (host-state.ts sends each one
//    as it happens: staleness is one IPC hop, well under a millisecond on an idle host);
//  - what this worker's requests see goes to the host: a connection failure or a last-resort
//    answer (the host re-checks and tells everyone), each breaker count, opening and Retry-After
//    pause (relayed to the other workers, so the host's breaker opens after proxy_failures
//    failures wherever they happened);
//  - concurrency slots are the host's: one round trip per request to an endpoint with a limit;
//    rate-limit tokens too, lent a few at a time (leased-buckets.ts), so most takes stay here;
//  - the status routes and /internal/metrics ask the host to gather every worker's counters or series.
import type { Logger } from 'pino';
import type { GatewayConfig } from '../../core/config.js';
import type { Catalogue } from '../catalogue.js';
import type { DiscoveryResult, DiscoveryService } from '../discovery.js';
import type { Endpoint } from '../endpoints.js';
import type { Health } from '../health.js';
import type { EndpointQueue, QueueSettings, Turn } from '../queue.js';
import type { EndpointRegistry } from '../registry.js';
import type { Backends } from '../state.js';
import { HostStats, type Stats } from '../telemetry.js';
import type { HostScope } from './host.js';
import { HostDiscovery, HostHealth, HostQueue } from './host-stand-ins.js';
import type { HealthObservation, HostCounters, Question, TakeAnswer, ToHost, ToWorker } from './host-protocol.js';
import { LeasedBuckets } from './leased-buckets.js';
import type { UsageBooks } from '../usage-books.js';
import type { Admission, KeyReport } from '../usage-ledger.js';

const GATHER_TIMEOUT_MS = 5_000;
const ADMIT_TIMEOUT_MS = 2_000;
const UNRESERVED: Admission = { ok: true, id: 0 };

export class WorkerLink implements HostScope {
  private asked = 0;
  private readonly pending = new Map<number, (value: unknown) => void>();
  private backends: Backends | null = null;

  /** `leaseMs`: how long leased rate-limit tokens are kept unused (leased-buckets.ts). */
  constructor(
    private readonly send: (m: ToHost) => void,
    readonly worker: number,
    leaseMs?: number,
  ) {
    this.buckets = new LeasedBuckets(
      {
        take: (takes, timeoutMs) => this.ask<TakeAnswer | undefined>({ what: 'take', takes }, timeoutMs, undefined),
        giveBack: (tokens) => this.send({ gw: 'giveBack', tokens }),
        failed: () => {
          if (this.backends) this.backends.stats.rateLimitStoreFailures++;
        },
      },
      leaseMs,
    );
  }

  /** The host keeps the usage ledger: admissions are asked (a host that does not answer in time
   *  lets the request through unreserved, as with the rate limits), settlements told. */
  usageBooks(): UsageBooks {
    return {
      local: false,
      admit: (budget, tokens) => this.ask<Admission>({ what: 'admit', budget, tokens }, ADMIT_TIMEOUT_MS, UNRESERVED),
      settle: (id, spent) => this.send({ gw: 'settle', id, spent }),
      report: async (budgets, only) =>
        (await this.ask<Record<string, KeyReport> | undefined>({ what: 'usage', budgets: [...budgets], only }, GATHER_TIMEOUT_MS, undefined)) ?? {},
    };
  }

  /** The worker's state, which the host's messages update from now on. */
  attach(backends: Backends): void {
    this.backends = backends;
    backends.metrics.offerToHost(() => this.metrics());
  }

  health(registry: EndpointRegistry, log: Logger): Health {
    return new HostHealth(registry, log, this);
  }

  discovery(registry: EndpointRegistry, catalogue: Catalogue, config: GatewayConfig, log: Logger): DiscoveryService {
    return new HostDiscovery(registry, catalogue, config, log, this);
  }

  /** Ask the host; the answer, or `fallback` if none came within `timeoutMs` (or the host left). */
  ask<T>(q: Question, timeoutMs: number, fallback: T): Promise<T> {
    const n = ++this.asked;
    return new Promise<T>((resolve) => {
      const timer = timeoutMs > 0 ? setTimeout(() => this.settle(n, fallback), timeoutMs) : null;
      this.pending.set(n, (v) => {
        if (timer) clearTimeout(timer);
        resolve(v as T);
      });
      this.send({ gw: 'ask', n, q });
    });
  }

  private settle(n: number, value: unknown): void {
    const done = this.pending.get(n);
    this.pending.delete(n);
    done?.(value);
  }

  /** The host is gone (the channel closed): every question gets its fallback now. */
  hostGone(): void {
    for (const n of [...this.pending.keys()]) this.settle(n, undefined);
  }

  private started = false;

  /** The host's whole state at start, applied before the worker listens. */
  async start(): Promise<void> {
    this.started = true;
    await this.sync();
  }

  /** A reload added endpoints: the host's news of them may have come before they existed here
   *  (the host reloads first), so its whole state is asked again. */
  added(): void {
    if (this.started) void this.sync();
  }

  private async sync(): Promise<void> {
    const state = await this.ask<ToWorker[] | undefined>({ what: 'state' }, 0, undefined);
    for (const m of state ?? []) this.receive(m);
  }

  receive(m: ToWorker): void {
    if (m.gw === 'answer') return this.settle(m.n, m.value);
    const b = this.backends;
    if (!b) return;
    if (m.gw === 'gather') {
      const { n } = m;
      if (m.what === 'snapshot') this.send({ gw: 'gathered', n, value: b.stats.snapshot(this.worker, b.endpoints.all) });
      else
        void b.metrics.registry.getMetricsAsJSON().then(
          (value) => this.send({ gw: 'gathered', n, value }),
          () => this.send({ gw: 'gathered', n, value: null }),
        );
      return;
    }
    if (m.gw === 'reload') return; // the worker's gateway takes it (bin/gw.js)
    const ep = b.endpoints.get(m.gw === 'health' ? m.o.id : m.id);
    if (!ep || ep.retired) return;
    switch (m.gw) {
      case 'health':
        return applyHealth(b, ep, m.o);
      case 'models':
        if (!m.list) b.catalogue.clear(ep);
        else {
          b.catalogue.set(ep, m.list.models, m.list.at);
          if (m.list.stale) b.catalogue.invalidate(ep);
        }
        return;
      case 'resident':
        return b.residency.accept(ep, m.entries);
      case 'load': {
        const r = m.report;
        const now = performance.now();
        const others = r ? Math.max(0, r.running + r.waiting - ep.active * r.workers) : 0;
        ep.engineLoad = r && {
          running: r.running,
          waiting: r.waiting,
          others,
          path: r.path,
          at: now - r.ageMs,
          until: now - r.ageMs + r.ttlMs,
          readAt: new Date(r.readAt),
        };
        return;
      }
      case 'count':
        return ep.breaker.countElsewhere(m.failed, m.answer);
      case 'open':
        return ep.breaker.openElsewhere(m.ms);
      case 'pause':
        return ep.pausedElsewhere(m.ms);
      case 'place':
        return b.placements.placedElsewhere(m.key, ep, m.home);
    }
  }

  // What this worker's requests saw, for the host.
  check(ep: Endpoint): void {
    this.send({ gw: 'check', id: ep.id });
  }

  failed(ep: Endpoint, reason: string): void {
    this.send({ gw: 'failed', id: ep.id, reason });
  }

  answered(ep: Endpoint, status: number): void {
    this.send({ gw: 'answered', id: ep.id, status });
  }

  counted(ep: Endpoint, failed: boolean, answer?: string): void {
    this.send({ gw: 'count', id: ep.id, failed, answer });
  }

  opened(ep: Endpoint, ms: number): void {
    this.send({ gw: 'open', id: ep.id, ms });
  }

  paused(ep: Endpoint, ms: number): void {
    this.send({ gw: 'pause', id: ep.id, ms });
  }

  placed(ep: Endpoint, key: number, home: boolean): void {
    this.send({ gw: 'place', id: ep.id, key, home });
  }

  /** Rate-limit takes from the host's buckets, all or none (the Redis store's contract), mostly
   *  from tokens the host lent this worker (leased-buckets.ts). */
  readonly buckets: LeasedBuckets;

  /** A concurrency queue whose slots are the host's. */
  queue(ep: Endpoint, settings: QueueSettings): EndpointQueue {
    return new HostQueue(settings, ep, this);
  }

  /** The worker stops: its leased rate-limit tokens go back. */
  close(): void {
    this.buckets.close();
  }

  /** Ask the host for a slot of the endpoint; `then` is told how the wait ended. Returns the
   *  question's number (to leave the queue). */
  acquire(id: string, then: (turn: Turn, cold: boolean) => void, model: string): number {
    const n = this.asked + 1;
    void this.ask<{ turn: Turn; cold?: boolean } | undefined>({ what: 'acquire', id, model }, 0, undefined).then((a) =>
      then(a?.turn ?? 'retired', a?.cold === true),
    );
    return n;
  }

  /** The waiter of ask `n` went away; the host still answers it (a slot granted meanwhile is
   *  given back by the waiter's queue). */
  leave(n: number): void {
    this.send({ gw: 'leave', n });
  }

  release(id: string, heldMs: number, model: string): void {
    this.send({ gw: 'release', id, heldMs, model });
  }

  /** The host's counters: every worker's, summed (this one's alone if the host does not answer). */
  async stats(local: Stats, endpoints: readonly Endpoint[]): Promise<Stats> {
    const all = await this.ask<HostCounters | undefined>({ what: 'stats' }, GATHER_TIMEOUT_MS, undefined);
    return all ? new HostStats(all.workers, new Map(all.queues)) : new HostStats([local.snapshot(this.worker, endpoints)]);
  }

  /** The host's Prometheus exposition (prom-client's cluster aggregation); null if it did not answer. */
  metrics(): Promise<string | null> {
    return this.ask<string | null>({ what: 'metrics' }, GATHER_TIMEOUT_MS, null);
  }

  /** Ask the host to rediscover models now (its discovery reaches every worker's catalogue). */
  refresh(): Promise<DiscoveryResult[]> {
    return this.ask<DiscoveryResult[]>({ what: 'refresh' }, 0, []);
  }
}

function applyHealth(b: Backends, ep: Endpoint, o: HealthObservation): void {
  const from = ep.state;
  ep.lastError = o.reason;
  ep.lastCheck = o.lastCheck === null ? null : new Date(o.lastCheck);
  ep.lastLatencyMs = o.lastLatencyMs;
  ep.consecutiveFailures = o.consecutiveFailures;
  ep.checksTotal = o.checksTotal;
  ep.checksPassed = o.checksPassed;
  ep.nextCheckAt = o.nextCheckAt === null ? null : new Date(o.nextCheckAt);
  if (o.check === 'fail') ep.breaker.healthFailure();
  else if (o.check === 'pass' && o.state === 'healthy') ep.breaker.healthSuccess();
  b.endpoints.setState(ep, o.state, o.reason);
  if (o.state === 'healthy' && from !== 'healthy') b.endpoints.emit('recovered', ep);
}
