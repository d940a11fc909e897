// OpenTelemetry tracing, as a service that outlives every compiled graph (like the metrics
// registry): the settings from the config and the standard OTEL_* variables, and the tracer the
// `trace` step makes spans with. Off (the default), nothing of OpenTelemetry is loaded and no
// step taps a hook for it; turned on, its packages are loaded once (otel.ts, imported lazily) and
// spans leave in batches, off the request path.
import type { IncomingHttpHeaders } from 'node:http';
import type { Logger } from 'pino';
import type { GatewayConfig } from '../core/config.js';
import { parseDuration } from '../core/duration.js';
import { sanitizeUrl } from './endpoint-plans.js';

/** Where spans go, which are kept and how often they leave: the config's `tracing` (with the
 *  OTEL_* variables in it). */
export interface TracingSettings {
  endpoint: string;
  headers: Record<string, string>;
  serviceName: string;
  sampleRatio: number;
  captureContent: boolean;
  /** How long an ended span may wait for its batch to leave. */
  batchDelayMs: number;
}

export type AttributeValue = string | number | boolean | readonly string[];

/** A span of the request or of one attempt. */
export interface TraceSpan {
  readonly traceId: string;
  readonly spanId: string;
  /** The caller's tracestate, passed on. */
  readonly traceState: string | undefined;
  /** Sampled: what is set is recorded and exported; else the span only carries the context on. */
  readonly recording: boolean;
  set(key: string, value: AttributeValue): void;
  /** Its status is ERROR (with a message). */
  fail(message?: string): void;
  /** Ended at `atMs` (a performance.now() time): it joins the next batch. */
  end(atMs: number): void;
}

/** The tracer a step uses: spans for the request and its attempts, and the trace context to send. */
export interface GatewayTracer {
  /** Messages may go on spans (the content-capture switch). */
  readonly captureContent: boolean;
  /** Where spans go (no credentials, no query), and the share of traces begun here that is kept:
   *  what /internal/status shows. */
  readonly exportsTo: string;
  readonly sampleRatio: number;
  /** The request's SERVER span, continuing the caller's trace (traceparent, tracestate), begun at
   *  `start` (a performance.now() time); sampled by the caller's flag, else by the ratio. */
  server(name: string, start: number, headers: IncomingHttpHeaders): TraceSpan;
  /** An upstream attempt's CLIENT span under `parent` (a recorded one), begun now. */
  client(parent: TraceSpan, name: string): TraceSpan;
}

/** The trace context headers that send `span`'s context on: [name, value, …] (W3C trace context). */
export function contextHeaders(span: TraceSpan): string[] {
  const out = ['traceparent', `00-${span.traceId}-${span.spanId}-${span.recording ? '01' : '00'}`];
  if (span.traceState) out.push('tracestate', span.traceState);
  return out;
}

/** The settings of a loaded config (the OTEL_* variables are read into it: core/otel-env.ts), or
 *  null while tracing is off. */
export function tracingSettings(config: GatewayConfig): TracingSettings | null {
  const t = config.tracing;
  if (!t.enabled) return null;
  return {
    endpoint: t.endpoint,
    headers: t.headers,
    serviceName: t.service_name,
    sampleRatio: t.sample_ratio,
    captureContent: t.capture_content,
    batchDelayMs: parseDuration(t.batch_delay),
  };
}

/** What otel.ts makes once it is loaded. */
export interface TracerProvision {
  tracer: GatewayTracer;
  /** Export what is held, then stop. */
  shutdown(): Promise<void>;
}

export class Tracing {
  /** The tracer while tracing is on; null while off (the `trace` step then taps nothing). */
  tracer: GatewayTracer | null = null;
  private provision: TracerProvision | null = null;
  private applied = '';

  constructor(private readonly log: Logger) {}

  /** Take the settings of a (re)loaded config: the packages are loaded the first time tracing is
   *  on; changed settings replace the tracer (what the old one holds is exported). */
  async configure(settings: TracingSettings | null, version: string): Promise<void> {
    const key = settings ? JSON.stringify(settings) : '';
    if (key === this.applied) return;
    const before = this.provision;
    if (settings) {
      const { provide } = await import('./otel.js');
      this.provision = provide(settings, version, this.log);
      this.log.info({ endpoint: sanitizeUrl(new URL(settings.endpoint)), sample_ratio: settings.sampleRatio }, 'tracing on: spans go over OTLP/HTTP');
    } else {
      this.provision = null;
      if (before) this.log.info('tracing off');
    }
    this.tracer = this.provision?.tracer ?? null;
    this.applied = key;
    if (before) await settle(before);
  }

  /** Export what is still held, then stop (at shutdown). */
  async stop(): Promise<void> {
    const p = this.provision;
    this.provision = null;
    this.tracer = null;
    this.applied = '';
    if (p) await settle(p);
  }
}

/** How long stopping waits for the last spans to leave: a collector that is down must not hold
 *  a shutdown or a reload (the exporter said so in the log already). */
const FLUSH_WAIT_MS = 2000;

async function settle(p: TracerProvision): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const waited = new Promise<void>((done) => (timer = setTimeout(done, FLUSH_WAIT_MS)));
  await Promise.race([p.shutdown().catch(() => undefined), waited]);
  clearTimeout(timer);
}
