// Request counters shared by the stats step and the status routes.
import type { Endpoint } from './endpoints.js';

export interface EndpointCounters {
  requests: number;
  errors: number;
  totalLatencyMs: number;
}

export class Stats {
  requestsTotal = 0;
  requestsActive = 0;
  requestsFailed = 0;
  totalLatencyMs = 0;
  private readonly perEndpoint = new Map<string, EndpointCounters>();

  endpoint(ep: Endpoint | string): EndpointCounters {
    const name = typeof ep === 'string' ? ep : ep.name;
    let c = this.perEndpoint.get(name);
    if (!c) this.perEndpoint.set(name, (c = { requests: 0, errors: 0, totalLatencyMs: 0 }));
    return c;
  }

  record(ep: Endpoint | null, latencyMs: number, failed: boolean): void {
    this.requestsTotal++;
    this.totalLatencyMs += latencyMs;
    if (failed) this.requestsFailed++;
    if (ep) {
      const c = this.endpoint(ep);
      c.requests++;
      c.totalLatencyMs += latencyMs;
      if (failed) c.errors++;
    }
  }
}
