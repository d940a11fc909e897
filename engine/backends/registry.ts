// The live endpoints, by id, grouped by family, with the routable lists cached. reconcile()
// applies a new configuration: an endpoint whose id stays keeps its object (pool, health,
// breaker, catalogue entries), a new one is added (and checked at once by its owner), a removed
// one is retired: it takes no new requests, and its pool closes once in-flight ones are done.
import { EventEmitter } from 'node:events';
import type { BreakerSettings } from './breaker.js';
import { idsOf, type EndpointPlan } from './endpoint-plans.js';
import { Endpoint, ROUTABLE, type HealthState } from './endpoints.js';
import { endpointDispatch, type HealthReports } from './interceptors.js';
import type { EndpointQueue, QueueSettings } from './queue.js';

export interface Reconciled {
  added: Endpoint[];
  kept: Endpoint[];
  removed: Endpoint[];
}

export class EndpointRegistry extends EventEmitter {
  /** Every endpoint in configuration order; replaced, never mutated. */
  all: readonly Endpoint[] = [];
  /** Routable endpoints of every family, in configuration order; replaced, never mutated. */
  routableAll: readonly Endpoint[] = [];
  /** Bumped on every health or membership change, so callers can cache what they derive from it. */
  version = 0;
  private byId = new Map<string, Endpoint>();
  private families = new Map<string, { endpoints: Endpoint[]; routable: Endpoint[] }>();

  /** `health`: how what proxied requests saw (a connection failure, an answer from an endpoint
   *  out of rotation) reaches the health monitor. */
  constructor(
    private readonly health: HealthReports,
    private readonly makeQueue?: (ep: Endpoint, settings: QueueSettings) => EndpointQueue,
  ) {
    super();
  }

  get(id: string): Endpoint | undefined {
    return this.byId.get(id);
  }

  /** Routable endpoints of a family, in configuration order; the array is replaced, never mutated. */
  routable(family: string): readonly Endpoint[] {
    return this.families.get(family)?.routable ?? [];
  }

  endpoints(family: string): readonly Endpoint[] {
    return this.families.get(family)?.endpoints ?? [];
  }

  reconcile(plans: readonly EndpointPlan[], breaker: BreakerSettings): Reconciled {
    const ids = idsOf(plans);
    const next = new Map<string, Endpoint>();
    const out: Reconciled = { added: [], kept: [], removed: [] };
    plans.forEach((plan, i) => {
      const found = this.byId.get(ids[i]);
      // Another family at the same URL is another backend to us: its state does not carry over.
      const existing = found && found.family === plan.profile.name ? found : undefined;
      if (existing) {
        const replacedPool = existing.apply(plan);
        existing.breaker.configure(breaker);
        // The old pool finishes what it carries, then closes.
        replacedPool?.close().catch(() => replacedPool.destroy());
        out.kept.push(existing);
        next.set(existing.id, existing);
      } else {
        const ep = new Endpoint(ids[i], plan, breaker, this.makeQueue);
        ep.dispatch = endpointDispatch(ep, this.health);
        out.added.push(ep);
        next.set(ep.id, ep);
      }
    });
    for (const ep of this.byId.values()) {
      if (next.get(ep.id) === ep) continue;
      ep.retire();
      out.removed.push(ep);
      ep.pool.close().catch(() => ep.pool.destroy());
    }
    this.byId = next;
    this.all = [...next.values()];
    this.families = new Map();
    for (const ep of this.all) {
      const fam = this.families.get(ep.family) ?? { endpoints: [], routable: [] };
      fam.endpoints.push(ep);
      this.families.set(ep.family, fam);
    }
    this.refresh();
    return out;
  }

  setState(ep: Endpoint, state: HealthState, reason = ''): void {
    if (ep.state === state) return;
    const from = ep.state;
    ep.state = state;
    this.refresh();
    this.emit('state', ep, from, state, reason);
    if (ROUTABLE[from] && !ROUTABLE[state]) ep.foundDown(reason ? `${state}: ${reason}` : state);
  }

  private refresh(): void {
    for (const fam of this.families.values()) fam.routable = fam.endpoints.filter((e) => e.routable);
    this.routableAll = this.all.filter((e) => e.routable);
    this.version++;
  }

  async close(): Promise<void> {
    await Promise.all(this.all.map((ep) => ep.pool.close().catch(() => ep.pool.destroy())));
  }
}
