// The OpenTelemetry SDK's part of tracing, loaded only once tracing is on (tracing.ts imports this
// file lazily): a tracer provider of its own (not the process-global one: two gateways in one
// process, as in the tests, keep their spans apart), a parent-based ratio sampler, W3C trace
// context in and out, and spans exported in batches over OTLP/HTTP — or, for tests, at once to
// the exporter given.
import { context, defaultTextMapGetter, defaultTextMapSetter, ROOT_CONTEXT, type Span, SpanKind, trace } from '@opentelemetry/api';
import { type ExportResult, ExportResultCode, W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import {
  BasicTracerProvider,
  BatchSpanProcessor,
  ParentBasedSampler,
  SimpleSpanProcessor,
  type SpanExporter,
  TraceIdRatioBasedSampler,
} from '@opentelemetry/sdk-trace-base';
import type { IncomingHttpHeaders } from 'node:http';
import type { Logger } from 'pino';
import type { ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { sanitizeUrl } from './endpoint-plans.js';
import type { GatewayTracer, TracerProvision, TracingSettings } from './tracing.js';

/** A failed export is said in the log (the SDK's own diagnostics are silent by default), at most
 *  once a minute: a collector that is down or refuses the key is then seen, not guessed. */
const WARN_EVERY_MS = 60_000;
/** One export, its retries included: a collector is near; a batch is not held longer. */
const EXPORT_TIMEOUT_MS = 5000;

function logged(inner: SpanExporter, log: Logger, endpoint: string): SpanExporter {
  let lastWarned = -Infinity;
  return {
    export(spans: ReadableSpan[], done: (result: ExportResult) => void) {
      inner.export(spans, (result) => {
        const now = performance.now();
        if (result.code !== ExportResultCode.SUCCESS && now - lastWarned >= WARN_EVERY_MS) {
          lastWarned = now;
          log.warn(
            { endpoint, spans: spans.length, error: result.error?.message },
            'tracing: spans could not be exported; they are dropped (check tracing.endpoint and the collector)',
          );
        }
        done(result);
      });
    },
    shutdown: () => inner.shutdown(),
    forceFlush: () => inner.forceFlush?.() ?? Promise.resolve(),
  };
}

export function provide(settings: TracingSettings, version: string, log: Logger, exporter?: SpanExporter): TracerProvision {
  const processor = exporter
    ? new SimpleSpanProcessor(exporter)
    : new BatchSpanProcessor(
        logged(
          new OTLPTraceExporter({ url: settings.endpoint, headers: settings.headers, timeoutMillis: EXPORT_TIMEOUT_MS }),
          log,
          sanitizeUrl(new URL(settings.endpoint)),
        ),
        { scheduledDelayMillis: 1000 },
      );
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ 'service.name': settings.serviceName, 'service.version': version }),
    sampler: new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(settings.sampleRatio) }),
    spanProcessors: [processor],
  });
  const tracer = provider.getTracer('inference-gateway', version);
  const propagator = new W3CTraceContextPropagator();
  const gatewayTracer: GatewayTracer = {
    captureContent: settings.captureContent,
    exportsTo: exporter ? '(in memory)' : sanitizeUrl(new URL(settings.endpoint)),
    sampleRatio: settings.sampleRatio,
    server(name: string, start: number, headers: IncomingHttpHeaders): Span {
      const caller = headers.traceparent ? propagator.extract(ROOT_CONTEXT, headers, defaultTextMapGetter) : ROOT_CONTEXT;
      return tracer.startSpan(name, { kind: SpanKind.SERVER, startTime: start }, caller);
    },
    client(parent: Span, name: string): Span {
      return tracer.startSpan(name, { kind: SpanKind.CLIENT }, trace.setSpan(context.active(), parent));
    },
    contextHeaders(span: Span): string[] {
      const carrier: Record<string, string> = {};
      propagator.inject(trace.setSpan(ROOT_CONTEXT, span), carrier, defaultTextMapSetter);
      const out: string[] = [];
      for (const name in carrier) out.push(name, carrier[name]);
      return out;
    },
  };
  return { tracer: gatewayTracer, shutdown: () => provider.shutdown() };
}
