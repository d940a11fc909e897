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
import type { Backends } from './state.js';
import type { Endpoint } from './endpoints.js';
import { EndpointQueue, type QueueSettings, type Turn, type Waiter } from './queue.js';
import type { HealthHost } from './health.js';
import type { HealthObservation, HostCounters, Question, TakeAnswer, ToHost, ToWorker } from './host-protocol.js';
import { LeasedBuckets } from './leased-buckets.js';
import { HostStats, type Stats } from './telemetry.js';

const GATHER_TIMEOUT_MS = 5_000;

export class WorkerLink implements HealthHost {
  private asked = 0;
  private readonly pending = new Map<number, (value: unknown) => void>();
  private backends: Backends | null = null;

  /** `leaseMs`: how long leased rate-limit tokens are kept unused (leased-buckets.ts). */
  constructor(private readonly send: (m: ToHost) => void, readonly worker: number, leaseMs?: number) {
    this.buckets = new LeasedBuckets({
      take: (takes, timeoutMs) => this.ask<TakeAnswer | undefined>({ what: 'take', takes }, timeoutMs, undefined),
      giveBack: (tokens) => this.send({ gw: 'giveBack', tokens }),
      failed: () => {
        if (this.backends) this.backends.stats.rateLimitStoreFailures++;
      },
    }, leaseMs);
  }

  /** The worker's state, which the host's messages update from now on. */
  attach(backends: Backends): void {
    this.backends = backends;
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
  resync(): void {
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
      else void b.metrics.registry.getMetricsAsJSON().then((value) => this.send({ gw: 'gathered', n, value }), () => this.send({ gw: 'gathered', n, value: null }));
      return;
    }
    if (m.gw === 'reload') return; // the worker's gateway takes it (bin/gw.js)
    const ep = b.endpoints.get(m.gw === 'health' ? m.o.id : m.id);
    if (!ep || ep.retired) return;
    switch (m.gw) {
      case 'health': return applyHealth(b, ep, m.o);
      case 'models':
        if (!m.list) b.catalogue.clear(ep);
        else {
          b.catalogue.set(ep, m.list.models, m.list.at);
          if (m.list.stale) b.catalogue.invalidate(ep);
        }
        return;
      case 'resident': return b.residency.accept(ep, m.entries);
      case 'load': {
        const r = m.report;
        const now = performance.now();
        const others = r ? Math.max(0, r.running + r.waiting - ep.active * r.workers) : 0;
        ep.engineLoad = r && { running: r.running, waiting: r.waiting, others, path: r.path, at: now - r.ageMs, until: now - r.ageMs + r.ttlMs, readAt: new Date(r.readAt) };
        return;
      }
      case 'count': return ep.breaker.countElsewhere(m.failed);
      case 'open': return ep.breaker.openElsewhere(m.ms);
      case 'pause': return ep.pausedElsewhere(m.ms);
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

  counted(ep: Endpoint, failed: boolean): void {
    this.send({ gw: 'count', id: ep.id, failed });
  }

  opened(ep: Endpoint, ms: number): void {
    this.send({ gw: 'open', id: ep.id, ms });
  }

  paused(ep: Endpoint, ms: number): void {
    this.send({ gw: 'pause', id: ep.id, ms });
  }

  /** Rate-limit takes from the host's buckets, all or none (the Redis store's contract), mostly
   *  from tokens the host lent this worker (leased-buckets.ts). */
  readonly buckets: LeasedBuckets;

  /** A concurrency queue whose slots are the host's. */
  queue(ep: Endpoint, settings: QueueSettings): EndpointQueue {
    return new HostQueue(settings, ep, this);
  }

  /** Ask the host for a slot of the endpoint; `then` is told how the wait ended. Returns the
   *  question's number (to leave the queue). */
  acquire(id: string, then: (turn: Turn) => void): number {
    const n = this.asked + 1;
    void this.ask<Turn | undefined>({ what: 'acquire', id }, 0, undefined).then((turn) => then(turn ?? 'retired'));
    return n;
  }

  /** The waiter of ask `n` went away; the host still answers it (a slot granted meanwhile is
   *  given back by the waiter's queue). */
  leave(n: number): void {
    this.send({ gw: 'leave', n });
  }

  release(id: string, heldMs: number): void {
    this.send({ gw: 'release', id, heldMs });
  }

  /** The host's counters: every worker's, summed (this one's alone if the host does not answer). */
  async hostStats(local: Stats, endpoints: readonly Endpoint[]): Promise<Stats> {
    const all = await this.ask<HostCounters | undefined>({ what: 'stats' }, GATHER_TIMEOUT_MS, undefined);
    return all ? new HostStats(all.workers, new Map(all.queues)) : new HostStats([local.snapshot(this.worker, endpoints)]);
  }

  /** The host's Prometheus exposition (prom-client's cluster aggregation); null if it did not answer. */
  metrics(): Promise<string | null> {
    return this.ask<string | null>({ what: 'metrics' }, GATHER_TIMEOUT_MS, null);
  }

  /** Ask the host to rediscover models now (its discovery reaches every worker's catalogue). */
  refresh<T>(): Promise<T[]> {
    return this.ask<T[]>({ what: 'refresh' }, 0, []);
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

/** A worker's side of a host-wide queue: every slot is asked of the host (tryEnter never takes
 *  one here, and the host answers 'full'); the counters are this worker's share. */
class HostQueue extends EndpointQueue {
  private readonly asks = new Map<Waiter, number>();

  constructor(settings: QueueSettings, private readonly ep: Endpoint, private readonly link: WorkerLink) {
    super(settings);
  }

  override tryEnter(): boolean {
    return false;
  }

  override get full(): boolean {
    return false;
  }

  override wait(settle: (turn: Turn) => void): Waiter {
    const waiter: Waiter = { since: performance.now(), settle, timer: null };
    const n = this.link.acquire(this.ep.id, (turn) => {
      if (!this.asks.delete(waiter)) {
        // It left first and the host granted the slot meanwhile: given back at once.
        if (turn === 'admitted') this.link.release(this.ep.id, 0);
        return;
      }
      if (turn === 'admitted') {
        this.held++;
        this.admitted++;
        this.waits.add(performance.now() - waiter.since);
      } else if (turn === 'timeout') this.timedOut++;
      settle(turn);
    });
    this.asks.set(waiter, n);
    return waiter;
  }

  override leave(waiter: Waiter): void {
    const n = this.asks.get(waiter);
    if (n === undefined) return;
    this.asks.delete(waiter);
    this.abandoned++;
    this.link.leave(n);
    waiter.settle('gone');
  }

  override release(since: number): void {
    super.release(since);
    this.link.release(this.ep.id, performance.now() - since);
  }

  override retire(): void {
    for (const w of [...this.asks.keys()]) {
      this.link.leave(this.asks.get(w)!);
      this.asks.delete(w);
      w.settle('retired');
    }
  }

  override get queued(): number {
    return this.asks.size;
  }
}
