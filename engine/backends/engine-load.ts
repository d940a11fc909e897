// How many requests each engine is running and holding in its queue, from the engine's own
// report (profile api.load_report: llama.cpp /metrics or /slots, vLLM and SGLang /metrics), read
// after each passing health check (engine-reports.ts). Balancing counts an endpoint's load as its
// requests from this gateway in flight now plus those the engine serves for anyone else: what it
// reported, less what this gateway had in flight when it did. A report is trusted for two check
// intervals; a stale, failed or missing one leaves the gateway's own count.
import type { Logger } from 'pino';
import type { LoadSource } from '../core/profiles.js';
import type { Endpoint } from './endpoints.js';
import { NotServed, type EngineReports } from './engine-reports.js';
import type { EndpointRegistry } from './registry.js';

export interface EngineLoadReport {
  running: number;
  waiting: number;
  /** Requests the engine serves for clients other than this gateway. */
  others: number;
  /** The path it came from. */
  path: string;
  /** performance.now() when it was read, and until when it counts. */
  at: number;
  until: number;
  /** When it was read, for status. */
  readAt: Date;
}

/** Sources of an endpoint that served none of them are asked again after this long. */
const RETRY_UNSERVED_MS = 300_000;

export class EngineLoad {
  private readonly inFlight;
  /** Per endpoint: the source that answered last, or when to try them all again — for the
   *  sources it was chosen among (a reloaded profile's new list starts afresh). */
  /** Told when an endpoint's report was read (the host passes it on to its workers). */
  onReport: ((ep: Endpoint) => void) | null = null;
  private readonly chosen = new WeakMap<Endpoint, { sources: readonly LoadSource[]; index: number; retryAt: number }>();

  constructor(
    registry: EndpointRegistry,
    private readonly reader: EngineReports,
    private readonly log: Logger,
  ) {
    this.inFlight = reader.singleFlight();
    registry.on('state', (ep: Endpoint) => {
      if (!ep.routable) ep.engineLoad = null;
    });
  }

  /** Ask the endpoint how loaded it is (after a passing health check); one request at a time. */
  refresh(ep: Endpoint): Promise<void> {
    const sources = ep.profile.api.load_report;
    if (!sources?.length) {
      ep.engineLoad = null; // a reloaded profile may have dropped it
      return Promise.resolve();
    }
    const c = this.chosen.get(ep);
    const known = c !== undefined && c.sources === sources;
    if (known && c.retryAt > performance.now()) return Promise.resolve();
    return this.inFlight.run(ep, () => this.read(ep, sources, known ? c.index : 0));
  }

  forget(ep: Endpoint): void {
    this.chosen.delete(ep);
    ep.engineLoad = null;
  }

  private async read(ep: Endpoint, sources: readonly LoadSource[], first: number): Promise<void> {
    const activeThen = ep.active;
    for (let k = 0; k < sources.length; k++) {
      const i = (first + k) % sources.length;
      const source = sources[i];
      try {
        const body = await this.reader.read(ep, source.path, `the ${source.path} reply`);
        const report = parseLoad(source, body.text());
        const running = Math.max(0, report.running);
        const waiting = Math.max(0, report.waiting);
        const now = performance.now();
        this.chosen.set(ep, { sources, index: i, retryAt: 0 });
        // It may have gone down while this was under way: a report of an unroutable endpoint is not kept.
        if (!ep.routable || ep.retired) return;
        const staleAfter = 2 * ep.checkIntervalMs + ep.checkTimeoutMs;
        ep.engineLoad = {
          running,
          waiting,
          others: Math.max(0, running + waiting - activeThen),
          path: source.path,
          at: now,
          until: now + staleAfter,
          readAt: new Date(),
        };
        this.onReport?.(ep);
        return;
      } catch (err) {
        if (err instanceof NotServed) continue;
        ep.engineLoad = null;
        if (!this.reader.stopped)
          this.log.debug(
            { endpoint: ep.name, path: source.path, err: err instanceof SyntaxError ? 'not JSON' : (err as Error).message },
            "engine load report failed; balancing counts only this gateway's requests",
          );
        return;
      }
    }
    ep.engineLoad = null;
    this.chosen.set(ep, { sources, index: 0, retryAt: performance.now() + RETRY_UNSERVED_MS });
    if (!this.reader.stopped)
      this.log.debug({ endpoint: ep.name, paths: sources.map((s) => s.path) }, 'the engine serves none of its load report routes; asked again in 5 minutes');
  }
}

/** Running and waiting requests from one report, in the source's format. */
export function parseLoad(source: LoadSource, text: string): { running: number; waiting: number } {
  if (source.format === 'llamacpp_slots') return slotsLoad(JSON.parse(text));
  return { running: metricSum(text, source.running ?? []), waiting: metricSum(text, source.waiting ?? []) };
}

/** llama.cpp /slots: one object per slot, processing (`is_processing`; older servers a `state` other than 0, idle) or idle. */
function slotsLoad(slots: unknown): { running: number; waiting: number } {
  if (!Array.isArray(slots)) throw new Error('the /slots reply is not a list of slots');
  let running = 0;
  for (const s of slots) if (typeof s?.is_processing === 'boolean' ? s.is_processing : typeof s?.state === 'number' && s.state !== 0) running++;
  return { running, waiting: 0 };
}

/** The sum over every label set of the named gauges in a Prometheus text exposition. */
export function metricSum(text: string, names: readonly string[]): number {
  if (names.length === 0) return 0;
  let sum = 0;
  let found = false;
  for (const line of text.split('\n')) {
    if (line.length === 0 || line.charCodeAt(0) === 35 /* # */) continue;
    const brace = line.indexOf('{');
    const space = line.indexOf(' ');
    const nameEnd = brace >= 0 && (space < 0 || brace < space) ? brace : space;
    if (nameEnd <= 0 || !names.includes(line.slice(0, nameEnd))) continue;
    const valueAt = brace === nameEnd ? line.lastIndexOf('}') + 1 : nameEnd + 1;
    const value = Number.parseFloat(line.slice(valueAt).trimStart().split(' ')[0]);
    if (Number.isFinite(value)) {
      sum += value;
      found = true;
    }
  }
  if (!found) throw new Error(`none of ${names.join(', ')} is in the report`);
  return sum;
}
