// What is kept once per host (sharing/scopes.ts): health checks, discovery, concurrency queues,
// the rate buckets, the breakers' counts. A gateway of one process is its own host (OwnHost);
// a worker of gw serve --workers N asks its host process (WorkerLink, host-link.ts). Which one is
// chosen once, where the backends' state is built: no part of the backends' state asks whether it
// runs in a worker (the kernel does, for what only a process does: its log's name, file watching).
import type { Logger } from 'pino';
import type { GatewayConfig } from '../../core/config.js';
import type { Catalogue } from '../catalogue.js';
import { DiscoveryService } from '../discovery.js';
import type { Endpoint } from '../endpoints.js';
import { HealthMonitor, type Health } from '../health.js';
import { EndpointQueue, type QueueSettings } from '../queue.js';
import type { SharedBuckets } from '../rate-buckets.js';
import type { EndpointRegistry } from '../registry.js';
import type { Backends } from '../state.js';
import type { Stats } from '../telemetry.js';
import { LocalBooks, type UsageBooks } from '../usage-books.js';
import type { UsageLedger } from '../usage-ledger.js';

export interface HostScope {
  /** This worker's number; null: a gateway of one process. */
  readonly worker: number | null;
  /** The host's rate buckets when they are another process's; null: this process's memory. */
  readonly buckets: SharedBuckets | null;
  /** The endpoints' health: checked here, or told by the host. `afterPass`: the engine's own
   *  reports, read after each passing check (where the checks run). */
  health(registry: EndpointRegistry, log: Logger, afterPass: (ep: Endpoint) => void): Health;
  /** Model discovery: run here, or asked of the host. */
  discovery(registry: EndpointRegistry, catalogue: Catalogue, config: GatewayConfig, log: Logger): DiscoveryService;
  /** An endpoint's concurrency queue: its slots here, or the host's. */
  queue(ep: Endpoint, settings: QueueSettings): EndpointQueue;
  /** What this process's requests saw of an endpoint, for the host's other workers: a breaker
   *  count (a failure, or a success that reset the count), an opening, a Retry-After pause. */
  counted(ep: Endpoint, failed: boolean, answer?: string): void;
  opened(ep: Endpoint, ms: number): void;
  paused(ep: Endpoint, ms: number): void;
  /** A conversation placed on `ep` away from its hash home (or back at it: `home`): affinity. */
  placed(ep: Endpoint, key: number, home: boolean): void;
  /** The usage ledger's port: this process's ledger, or the host's (a worker asks it). */
  usageBooks(ledger: UsageLedger): UsageBooks;
  /** The backends' state is built: the host's news applies to it from now on. */
  attach(backends: Backends): void;
  /** Before the first checks: a worker takes its host's state. */
  start(): Promise<void>;
  /** A reload added endpoints: a worker asks its host's state of them again. */
  added(): void;
  /** The counters of the whole host: this process's, or every worker's summed. */
  stats(local: Stats, endpoints: readonly Endpoint[]): Promise<Stats>;
  close(): void;
}

/** A gateway of one process (or the host of workers itself): everything host-wide is here. */
export class OwnHost implements HostScope {
  readonly worker = null;
  readonly buckets = null;

  health(registry: EndpointRegistry, log: Logger, afterPass: (ep: Endpoint) => void): Health {
    return new HealthMonitor(registry, log, afterPass);
  }

  discovery(registry: EndpointRegistry, catalogue: Catalogue, config: GatewayConfig, log: Logger): DiscoveryService {
    return new DiscoveryService(registry, catalogue, config, log);
  }

  queue(_ep: Endpoint, settings: QueueSettings): EndpointQueue {
    return new EndpointQueue(settings);
  }

  usageBooks(ledger: UsageLedger): UsageBooks {
    return new LocalBooks(ledger);
  }

  // No other process to tell.
  counted(): void {}
  opened(): void {}
  paused(): void {}
  placed(): void {}
  attach(): void {}
  async start(): Promise<void> {}
  added(): void {}
  close(): void {}

  stats(local: Stats): Promise<Stats> {
    return Promise.resolve(local);
  }
}
