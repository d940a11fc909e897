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

/** Where spans go and which are kept: the config's `tracing`, the environment's OTEL_* winning. */
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

const truthy = (v: string | undefined) => v !== undefined && ['true', '1', 'yes', 'on'].includes(v.trim().toLowerCase());

/** name=value,… (OTEL_EXPORTER_OTLP_HEADERS: values percent-encoded). */
function headerList(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const pair of text.split(',')) {
    const eq = pair.indexOf('=');
    if (eq > 0) out[pair.slice(0, eq).trim()] = decodeURIComponent(pair.slice(eq + 1).trim());
  }
  return out;
}

/** The effective settings, or null while tracing is off. The OTEL_* variables are the standard
 *  ones (the OpenTelemetry SDK configuration spec); they win over the config file, as GW_* do. */
export function tracingSettings(config: GatewayConfig, env: NodeJS.ProcessEnv): TracingSettings | null {
  const t = config.tracing;
  const exporters = env.OTEL_TRACES_EXPORTER?.split(',').map((s) => s.trim());
  const traceEndpoint = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT;
  const baseEndpoint = env.OTEL_EXPORTER_OTLP_ENDPOINT;
  const on = t.enabled || exporters?.includes('otlp') || !!traceEndpoint || !!baseEndpoint;
  if (!on || truthy(env.OTEL_SDK_DISABLED) || exporters?.includes('none')) return null;
  const ratio = Number(env.OTEL_TRACES_SAMPLER_ARG);
  const headers = env.OTEL_EXPORTER_OTLP_TRACES_HEADERS ?? env.OTEL_EXPORTER_OTLP_HEADERS;
  return {
    endpoint: traceEndpoint || (baseEndpoint ? `${baseEndpoint.replace(/\/+$/, '')}/v1/traces` : t.endpoint),
    headers: headers ? headerList(headers) : t.headers,
    serviceName: env.OTEL_SERVICE_NAME || t.service_name,
    sampleRatio: env.OTEL_TRACES_SAMPLER_ARG !== undefined && ratio >= 0 && ratio <= 1 ? ratio : t.sample_ratio,
    captureContent: t.capture_content || truthy(env.OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT),
  };
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
