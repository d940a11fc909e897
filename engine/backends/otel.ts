// The OpenTelemetry SDK's part of tracing, loaded only once tracing is on (tracing.ts imports this
// file lazily): a tracer provider of its own (not the process-global one: two gateways in one
// process, as in the tests, keep their spans apart), a parent-based ratio sampler, W3C trace
// context in and out, and spans exported in batches over OTLP/HTTP — or, for tests, at once to
// the exporter given.
import { context, defaultTextMapGetter, defaultTextMapSetter, ROOT_CONTEXT, type Span, SpanKind, trace } from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
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
import type { GatewayTracer, TracerProvision, TracingSettings } from './tracing.js';

export function provide(settings: TracingSettings, version: string, exporter?: SpanExporter): TracerProvision {
  const processor = exporter
    ? new SimpleSpanProcessor(exporter)
    : new BatchSpanProcessor(new OTLPTraceExporter({ url: settings.endpoint, headers: settings.headers }), { scheduledDelayMillis: 1000 });
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ 'service.name': settings.serviceName, 'service.version': version }),
    sampler: new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(settings.sampleRatio) }),
    spanProcessors: [processor],
  });
  const tracer = provider.getTracer('inference-gateway', version);
  const propagator = new W3CTraceContextPropagator();
  const gatewayTracer: GatewayTracer = {
    captureContent: settings.captureContent,
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
