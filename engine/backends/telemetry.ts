// Counters shared by the stats step and the status routes: requests, latencies (a window of
// recent samples for p95/p99), per-endpoint counts, connections and garbage collection.
import { PerformanceObserver } from 'node:perf_hooks';
import type { Endpoint } from './endpoints.js';
import type { QueueCounts } from './queue.js';
import { clip, ECHO_MAX } from '../core/head.js';

export interface EndpointCounters {
  requests: number;
  /** Failures: 5xx, timeouts, connection errors, replies that broke off. */
  errors: number;
  /** Client errors (4xx): counted as requests, never as failures. */
  clientErrors: number;
  totalLatencyMs: number;
}

/** How a finished request ended, for the counters: served, refused or answered with a 4xx (the
 *  request's fault: a client error), or failed (the gateway or a backend could not serve it). */
export type Outcome = 'ok' | 'client_error' | 'failed';

export type ModelCounters = EndpointCounters;

/** Counters of one translator (the spec's translator statistics record). */
export interface TranslatorCounters {
  total: number;
  succeeded: number;
  failed: number;
  passthrough: number;
  translation: number;
  streaming: number;
  nonStreaming: number;
  totalLatencyMs: number;
  malformedChunks: number;
  fallbackNoCompatibleEndpoints: number;
  fallbackTranslatorDoesNotSupportPassthrough: number;
  fallbackCannotPassthrough: number;
}

/** One worker's counters as its host gathers them for the status routes (plain JSON: sharing/host-link.ts). */
export interface StatsSnapshot {
  worker: number;
  pid: number;
  uptimeS: number;
  rssBytes: number;
  heapUsedBytes: number;
  counters: Record<(typeof SUMMED)[number], number>;
  rateLimited: Stats['rateLimited'];
  refused: Stats['refused'];
  /** The recent window: latencies (ms), and of the judged requests how many and how many failed. */
  recent: number[];
  judged: { count: number; failures: number };
  perEndpoint: [string, EndpointCounters][];
  perModel: [string, ModelCounters][];
  translators: [string, TranslatorCounters][];
  /** Attempts in flight by endpoint name. */
  active: [string, number][];
}

const SUMMED = [
  'requestsTotal',
  'inFlight',
  'requestsFailed',
  'requestsClientErrors',
  'rateLimitStoreFailures',
  'totalLatencyMs',
  'connectionsOpen',
  'connectionsTotal',
  'gcRuns',
  'gcPauseMs',
] as const;

const WINDOW = 2048;
const MAX_MODELS = 1000;

export class Stats {
  requestsTotal = 0;
  /** Requests of any route being handled now (shutdown waits for these). */
  inFlight = 0;
  /** The gateway is shutting down: it finishes what it holds and takes nothing new (/internal/ready says so). */
  draining = false;
  requestsFailed = 0;
  /** Requests answered with a client error (4xx): neither a success nor a failure of the system. */
  requestsClientErrors = 0;
  /** Rate-limit takes the shared store could not answer (the requests passed). */
  rateLimitStoreFailures = 0;
  /** 429s sent by the rate limiter, by scope (global, ip, health, internal, endpoint). */
  readonly rateLimited = { global: 0, ip: 0, health: 0, internal: 0, endpoint: 0 };
  totalLatencyMs = 0;
  connectionsOpen = 0;
  connectionsTotal = 0;
  gcRuns = 0;
  gcPauseMs = 0;
  /** Requests refused before any route took them: an unsafe path (UNSAFE_PATH), no route (ROUTE_NOT_FOUND). */
  readonly refused = { unsafePath: 0, routeNotFound: 0 };
  private readonly recent = new Float64Array(WINDOW);
  private samples = 0;
  /** The last WINDOW requests that were not client errors: 1 for a failure. The success rate of
   *  the status routes is read here, so an outage an hour ago does not colour the verdict now. */
  private readonly judged = new Uint8Array(WINDOW);
  private judgedCount = 0;
  private judgedFailures = 0;
  private readonly perEndpoint = new Map<string, EndpointCounters>();
  readonly perModel = new Map<string, ModelCounters>();
  readonly translators = new Map<string, TranslatorCounters>();
  private gcObserver: PerformanceObserver | null = null;

  endpoint(ep: Endpoint | string): EndpointCounters {
    const name = typeof ep === 'string' ? ep : ep.name;
    let c = this.perEndpoint.get(name);
    if (!c) this.perEndpoint.set(name, (c = { requests: 0, errors: 0, clientErrors: 0, totalLatencyMs: 0 }));
    return c;
  }

  record(ep: Endpoint | null, latencyMs: number, outcome: Outcome, model?: string): void {
    const failed = outcome === 'failed';
    const clientError = outcome === 'client_error';
    if (model) {
      // Clients choose model names: keep the table bounded, in entries and in key size.
      if (model.length > ECHO_MAX) model = clip(model);
      if (!this.perModel.has(model) && this.perModel.size >= MAX_MODELS) model = '(other)';
      let m = this.perModel.get(model);
      if (!m) this.perModel.set(model, (m = { requests: 0, errors: 0, clientErrors: 0, totalLatencyMs: 0 }));
      m.requests++;
      m.totalLatencyMs += latencyMs;
      if (failed) m.errors++;
      else if (clientError) m.clientErrors++;
    }
    this.requestsTotal++;
    this.totalLatencyMs += latencyMs;
    this.recent[this.samples++ % WINDOW] = latencyMs;
    if (failed) this.requestsFailed++;
    else if (clientError) this.requestsClientErrors++;
    if (!clientError) {
      const i = this.judgedCount++ % WINDOW;
      const now = failed ? 1 : 0;
      this.judgedFailures += now - this.judged[i];
      this.judged[i] = now;
    }
    if (ep) {
      const c = this.endpoint(ep);
      c.requests++;
      c.totalLatencyMs += latencyMs;
      if (failed) c.errors++;
      else if (clientError) c.clientErrors++;
    }
  }

  translator(name: string): TranslatorCounters {
    let t = this.translators.get(name);
    if (!t) {
      t = {
        total: 0,
        succeeded: 0,
        failed: 0,
        passthrough: 0,
        translation: 0,
        streaming: 0,
        nonStreaming: 0,
        totalLatencyMs: 0,
        malformedChunks: 0,
        fallbackNoCompatibleEndpoints: 0,
        fallbackTranslatorDoesNotSupportPassthrough: 0,
        fallbackCannotPassthrough: 0,
      };
      this.translators.set(name, t);
    }
    return t;
  }

  /** Success rate (0..1) of the last WINDOW requests that were not client errors; null before any. */
  recentSuccessRate(): number | null {
    const n = Math.min(this.judgedCount, WINDOW);
    return n === 0 ? null : (n - this.judgedFailures) / n;
  }

  /** Latency percentile over the recent window, in milliseconds (0 before any traffic). */
  percentile(p: number): number {
    return percentileOf(Array.from(this.recent.subarray(0, Math.min(this.samples, WINDOW))), p);
  }

  /** Attempts in flight to the endpoint now (a host's view sums its workers'). */
  activeOn(ep: Endpoint): number {
    return ep.active;
  }

  /** The endpoint's queue counters, when a host keeps them (its queues are the only ones); null:
   *  the endpoint's own queue. */
  queueOn(_ep: Endpoint): QueueCounts | null {
    return null;
  }

  /** These counters for the host's status routes. */
  snapshot(worker: number, endpoints: readonly Endpoint[]): StatsSnapshot {
    const mem = process.memoryUsage();
    const n = Math.min(this.judgedCount, WINDOW);
    const counters = {} as StatsSnapshot['counters'];
    for (const k of SUMMED) counters[k] = this[k];
    return {
      worker,
      pid: process.pid,
      uptimeS: Math.round(process.uptime()),
      rssBytes: mem.rss,
      heapUsedBytes: mem.heapUsed,
      counters,
      rateLimited: { ...this.rateLimited },
      refused: { ...this.refused },
      recent: Array.from(this.recent.subarray(0, Math.min(this.samples, WINDOW))),
      judged: { count: n, failures: this.judgedFailures },
      perEndpoint: [...this.perEndpoint],
      perModel: [...this.perModel],
      translators: [...this.translators],
      active: endpoints.map((ep) => [ep.name, ep.active]),
    };
  }

  /** Count garbage collections and their pauses, for /internal/process. */
  observeGc(): void {
    if (this.gcObserver) return;
    this.gcObserver = new PerformanceObserver((list) => {
      for (const e of list.getEntries()) {
        this.gcRuns++;
        this.gcPauseMs += e.duration;
      }
    });
    this.gcObserver.observe({ entryTypes: ['gc'] });
  }

  stopObserving(): void {
    this.gcObserver?.disconnect();
    this.gcObserver = null;
  }
}

/** A host's counters: the sum of its workers' (their windows side by side for the percentiles and
 *  the success rate). Made per status request from the snapshots the host gathered. */
export class HostStats extends Stats {
  private readonly window: number[] = [];
  private judgedN = 0;
  private judgedF = 0;
  private readonly activeByName = new Map<string, number>();

  constructor(
    readonly workers: readonly StatsSnapshot[],
    private readonly queues: ReadonlyMap<string, QueueCounts> = new Map(),
  ) {
    super();
    for (const w of workers) {
      for (const k of SUMMED) this[k] += w.counters[k];
      for (const k of Object.keys(w.rateLimited) as (keyof Stats['rateLimited'])[]) this.rateLimited[k] += w.rateLimited[k];
      for (const k of Object.keys(w.refused) as (keyof Stats['refused'])[]) this.refused[k] += w.refused[k];
      this.window.push(...w.recent);
      this.judgedN += w.judged.count;
      this.judgedF += w.judged.failures;
      for (const [name, c] of w.perEndpoint) addInto(this.endpoint(name), c);
      for (const [name, c] of w.perModel)
        addInto(
          getOr(this.perModel, name, () => ({ requests: 0, errors: 0, clientErrors: 0, totalLatencyMs: 0 })),
          c,
        );
      for (const [name, t] of w.translators) addInto(this.translator(name), t);
      for (const [name, n] of w.active) this.activeByName.set(name, (this.activeByName.get(name) ?? 0) + n);
    }
  }

  override activeOn(ep: Endpoint): number {
    return this.activeByName.get(ep.name) ?? 0;
  }

  override queueOn(ep: Endpoint): QueueCounts | null {
    return this.queues.get(ep.id) ?? null;
  }

  override recentSuccessRate(): number | null {
    return this.judgedN === 0 ? null : (this.judgedN - this.judgedF) / this.judgedN;
  }

  override percentile(p: number): number {
    return percentileOf([...this.window], p);
  }
}

/** The p-th percentile of `values` (sorted here, in place), 0 for none. */
function percentileOf(values: number[], p: number): number {
  const n = values.length;
  if (n === 0) return 0;
  values.sort((a, b) => a - b);
  return values[Math.min(n - 1, Math.ceil((p / 100) * n) - 1)];
}

function addInto<T extends object>(into: T, from: T): void {
  for (const k of Object.keys(from) as (keyof T)[]) (into[k] as number) += from[k] as number;
}

function getOr<K, V>(map: Map<K, V>, key: K, make: () => V): V {
  let v = map.get(key);
  if (v === undefined) map.set(key, (v = make()));
  return v;
}
