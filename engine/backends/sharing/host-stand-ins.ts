// A worker's stand-ins for what its host keeps (gw serve --workers N): health, discovery and
// concurrency queues that ask the host (through its link, host-link.ts) instead of doing the
// work here. The host's own are the ordinary ones (health.ts, discovery.ts, queue.ts).
import type { Logger } from 'pino';
import type { GatewayConfig } from '../../core/config.js';
import type { Catalogue } from '../catalogue.js';
import { DiscoveryService, type DiscoveryResult } from '../discovery.js';
import type { Endpoint } from '../endpoints.js';
import { takeOutOfRotation, type Health } from '../health.js';
import { EndpointQueue, type QueueSettings, type Turn, type Waiter } from '../queue.js';
import type { EndpointRegistry } from '../registry.js';

/** What a worker's health tells its host, whose checks reach every worker as observations. */
export interface HealthAsks {
  check(ep: Endpoint): void;
  failed(ep: Endpoint, reason: string): void;
  answered(ep: Endpoint, status: number): void;
}

/** A worker's health: no checks of its own; what its requests saw goes to the host. */
export class HostHealth implements Health {
  private stopped = false;

  constructor(
    private readonly registry: EndpointRegistry,
    private readonly log: Logger,
    private readonly host: HealthAsks,
  ) {}

  async start(): Promise<void> {}
  reconcile(): void {}

  async stop(): Promise<void> {
    this.stopped = true;
  }

  /** Out of rotation here at once; the host takes it out everywhere and checks it again. */
  markFailed(ep: Endpoint, reason: string): void {
    if (takeOutOfRotation(this.registry, this.log, ep, reason)) this.host.failed(ep, reason);
  }

  markAnswered(ep: Endpoint, status: number): void {
    if (!this.stopped && !ep.routable && !ep.retired) this.host.answered(ep, status);
  }

  check(ep: Endpoint): Promise<void> {
    this.host.check(ep);
    return Promise.resolve();
  }
}

/** A worker's discovery: never scheduled here; asked on demand, the host discovers for everyone. */
export class HostDiscovery extends DiscoveryService {
  constructor(
    registry: EndpointRegistry,
    catalogue: Catalogue,
    config: GatewayConfig,
    log: Logger,
    private readonly host: { refresh(): Promise<DiscoveryResult[]> },
  ) {
    super(registry, catalogue, config, log);
  }

  override async start(): Promise<void> {}

  override async refresh(): Promise<DiscoveryResult[]> {
    return this.enabled ? this.host.refresh() : [];
  }
}

/** What a worker's queue asks of its host: a slot (answered when granted), leaving the wait,
 *  giving a slot back. */
export interface SlotAsks {
  /** Returns the question's number (to leave the wait by). */
  /** `then` is told how the wait ended, and once admitted whether the engine may be loading the
   *  model (a switch the host's queue served by model made). */
  acquire(id: string, then: (turn: Turn, cold: boolean) => void, model: string): number;
  leave(n: number): void;
  release(id: string, heldMs: number, model: string): void;
}

/** A worker's side of a host-wide queue: every slot is asked of the host (tryEnter never takes
 *  one here, and the host answers 'full'); the counters are this worker's share. */
export class HostQueue extends EndpointQueue {
  private readonly asks = new Map<Waiter, number>();
  /** Models the host said the engine may be loading, at their last admission here. */
  private readonly loading = new Set<string>();

  constructor(
    settings: QueueSettings,
    private readonly ep: Endpoint,
    private readonly host: SlotAsks,
  ) {
    super(settings);
  }

  override tryEnter(): boolean {
    return false;
  }

  override coldFor(model: string): boolean {
    return this.loading.has(model);
  }

  /** Whose turn it is by model is the host's to say (its queue's counts reach the status routes). */
  override configure(settings: QueueSettings): void {
    super.configure(settings);
    this.turns = null;
  }

  override get full(): boolean {
    return false;
  }

  override wait(settle: (turn: Turn) => void, model = ''): Waiter {
    const waiter: Waiter = { since: performance.now(), model, settle, timer: null };
    const n = this.host.acquire(
      this.ep.id,
      (turn, cold) => {
        if (!this.asks.delete(waiter)) {
          // It left first and the host granted the slot meanwhile: given back at once.
          if (turn === 'admitted') this.host.release(this.ep.id, 0, model);
          return;
        }
        if (turn === 'admitted') {
          if (cold) this.loading.add(model);
          else this.loading.delete(model);
          this.held++;
          this.admitted++;
          this.waits.add(performance.now() - waiter.since);
        } else if (turn === 'timeout') this.timedOut++;
        settle(turn);
      },
      model,
    );
    this.asks.set(waiter, n);
    return waiter;
  }

  override leave(waiter: Waiter): void {
    const n = this.asks.get(waiter);
    if (n === undefined) return;
    this.asks.delete(waiter);
    this.abandoned++;
    this.host.leave(n);
    waiter.settle('gone');
  }

  override release(since: number, model = ''): void {
    super.release(since, model);
    this.host.release(this.ep.id, performance.now() - since, model);
  }

  override retire(): void {
    for (const w of [...this.asks.keys()]) {
      this.host.leave(this.asks.get(w)!);
      this.asks.delete(w);
      w.settle('retired');
    }
  }

  override get queued(): number {
    return this.asks.size;
  }
}
