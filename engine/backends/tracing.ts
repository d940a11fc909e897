// OpenTelemetry tracing, as a service that outlives every compiled graph (like the metrics
// registry): the settings from the config and the standard OTEL_* variables, and the tracer the
// `trace` step makes spans with. Off (the default), nothing of the SDK is loaded and no step taps
// a hook for it; turned on, the SDK is loaded once (otel.ts, imported lazily) and spans leave in
// batches, off the request path.
import type { Span } from '@opentelemetry/api';
import type { SpanExporter } from '@opentelemetry/sdk-trace-base';
import type { IncomingHttpHeaders } from 'node:http';
import type { Logger } from 'pino';
import type { GatewayConfig } from '../core/config.js';
import { sanitizeUrl } from './endpoint-plans.js';

/** Where spans go and which are kept: the config's `tracing` (with the OTEL_* variables in it). */
export interface TracingSettings {
  endpoint: string;
  headers: Record<string, string>;
  serviceName: string;
  sampleRatio: number;
  captureContent: boolean;
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
   *  `start` (a performance.now() time). */
  server(name: string, start: number, headers: IncomingHttpHeaders): Span;
  /** An upstream attempt's CLIENT span under `parent`, begun now. */
  client(parent: Span, name: string): Span;
  /** The trace context headers that send `span`'s context on: [name, value, …]. */
  contextHeaders(span: Span): string[];
}

/** The settings of a loaded config (the OTEL_* variables are read into it: core/otel-env.ts), or
 *  null while tracing is off. */
export function tracingSettings(config: GatewayConfig): TracingSettings | null {
  const t = config.tracing;
  if (!t.enabled) return null;
  return { endpoint: t.endpoint, headers: t.headers, serviceName: t.service_name, sampleRatio: t.sample_ratio, captureContent: t.capture_content };
}

/** The SDK's part, made by otel.ts once it is loaded. */
export interface TracerProvision {
  tracer: GatewayTracer;
  shutdown(): Promise<void>;
}

export class Tracing {
  /** The tracer while tracing is on; null while off (the `trace` step then taps nothing). */
  tracer: GatewayTracer | null = null;
  private provision: TracerProvision | null = null;
  private applied = '';

  /** @param exporter tests: spans to this exporter at once, instead of batched over OTLP/HTTP. */
  constructor(
    private readonly log: Logger,
    private readonly exporter?: SpanExporter,
  ) {}

  /** Take the settings of a (re)loaded config: the SDK is loaded the first time tracing is on;
   *  changed settings replace the provider (what the old one holds is flushed). */
  async configure(settings: TracingSettings | null, version: string): Promise<void> {
    const key = settings ? JSON.stringify(settings) : '';
    if (key === this.applied) return;
    const before = this.provision;
    if (settings) {
      const { provide } = await import('./otel.js');
      this.provision = provide(settings, version, this.log, this.exporter);
      this.log.info(
        { endpoint: this.exporter ? '(in memory)' : sanitizeUrl(new URL(settings.endpoint)), sample_ratio: settings.sampleRatio },
        'tracing on: spans go over OTLP/HTTP',
      );
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
