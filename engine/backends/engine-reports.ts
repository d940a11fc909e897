// What engines say about themselves on routes of their own — which models are loaded
// (residency.ts), how many requests they are running (engine-load.ts) — read after each passing
// health check on connections of their own, within check_timeout and a size limit. A failed read
// makes that report unknown and never touches health, breaker or traffic counts.
import { Agent, request } from 'undici';
import type { Endpoint } from './endpoints.js';
import { BoundedBody } from './json-reply.js';
import { SingleFlight } from './single-flight.js';

/** A report is a few KiB (a busy engine's /metrics some tens): this bounds what one endpoint can
 *  make the gateway hold. */
export const REPORT_LIMIT = 1024 * 1024;

/** A route the endpoint does not serve (its engine was started without it): the next source is tried. */
export class NotServed extends Error {}

export class EngineReports {
  private readonly agent = new Agent({ keepAliveTimeout: 2_500, keepAliveMaxTimeout: 2_500 });
  private readonly halt = new AbortController();
  private readonly running: SingleFlight<Endpoint, void>[] = [];

  /** One read at a time per endpoint for each kind of report. */
  singleFlight(): SingleFlight<Endpoint, void> {
    const s = new SingleFlight<Endpoint, void>();
    this.running.push(s);
    return s;
  }

  get stopped(): boolean {
    return this.halt.signal.aborted;
  }

  /** The body of GET `path` on the endpoint; NotServed on a 404, 405 or 501, an error on any other status. */
  async read(ep: Endpoint, path: string, what: string): Promise<BoundedBody> {
    const res = await request(ep.origin + ep.upstreamPath(path), {
      method: 'GET',
      headers: ep.headers as string[],
      signal: AbortSignal.any([this.halt.signal, AbortSignal.timeout(ep.checkTimeoutMs)]),
      dispatcher: this.agent,
    });
    if (res.statusCode !== 200) {
      await res.body.dump();
      const s = res.statusCode;
      throw s === 404 || s === 405 || s === 501 ? new NotServed(`${path} answered ${s}`) : new Error(`${path} answered ${s}`);
    }
    const body = new BoundedBody(REPORT_LIMIT, what);
    for await (const chunk of res.body) body.add(chunk as Buffer);
    return body;
  }

  async stop(): Promise<void> {
    this.halt.abort();
    await Promise.all(this.running.map((s) => s.drain()));
    await this.agent.close();
  }
}
