// OpenTelemetry's part of tracing, loaded only once tracing is on (tracing.ts imports this file
// lazily). From its packages: W3C trace context parsed (traceparent, tracestate), ids made and
// root traces sampled by ratio as the SDK does, and the OTLP/HTTP transport (timeout, retries on
// 429/502/503/504 with Retry-After, a bound on concurrent exports). The gateway's own: its spans
// kept as plain records (recorded-span.ts), batched here, and written as OTLP/JSON in one pass
// (otlp-json.ts) — the SDK's span objects and generic serializer cost 4–5 times what a recorded
// request costs in all (bench/RESULTS.md, issue 33).
import { isSpanContextValid, ROOT_CONTEXT } from '@opentelemetry/api';
import { type ExportResult, ExportResultCode, parseTraceParent, TraceState } from '@opentelemetry/core';
import { convertLegacyHttpOptions, createOtlpHttpExportDelegate } from '@opentelemetry/otlp-exporter-base/node-http';
import { RandomIdGenerator, SamplingDecision, TraceIdRatioBasedSampler } from '@opentelemetry/sdk-trace-base';
import type { IncomingHttpHeaders } from 'node:http';
import type { Logger } from 'pino';
import { sanitizeUrl } from './endpoint-plans.js';
import { exportBody, exportFrame, OTLP_CLIENT, OTLP_SERVER, spanJson } from './otlp-json.js';
import { ContextSpan, RecordedSpan } from './recorded-span.js';
import { type Batch, SpanBatch } from './span-batch.js';
import type { GatewayTracer, TracerProvision, TracingSettings, TraceSpan } from './tracing.js';

/** One export, its retries included: a collector is near; a batch is not held longer. */
const EXPORT_TIMEOUT_MS = 5000;

export function provide(settings: TracingSettings, version: string, log: Logger): TracerProvision {
  const endpoint = sanitizeUrl(new URL(settings.endpoint));
  const frame = exportFrame({
    resource: ['service.name', settings.serviceName, 'service.version', version, 'telemetry.sdk.name', 'opentelemetry', 'telemetry.sdk.language', 'nodejs'],
    scope: { name: 'inference-gateway', version },
  });
  const delegate = createOtlpHttpExportDelegate(
    convertLegacyHttpOptions({ url: settings.endpoint, headers: settings.headers, timeoutMillis: EXPORT_TIMEOUT_MS }, 'TRACES', 'v1/traces', {
      'Content-Type': 'application/json',
    }),
    { serializeRequest: (batch: Batch) => exportBody(frame, batch.bytes), deserializeResponse: () => ({}) },
    'otlp_http_span_exporter',
    { name: 'span', countItems: (batch: Batch) => batch.count },
    undefined,
  );
  const send = (spans: Batch) =>
    new Promise<void>((done) =>
      delegate.export(spans, (result: ExportResult) => done(void (result.code !== ExportResultCode.SUCCESS && batch.lost(spans.count, result.error)))),
    );
  const batch = new SpanBatch(send, settings.batchDelayMs, (spans, why) =>
    log.warn({ endpoint, spans, error: why }, 'tracing: spans could not be exported; they are dropped (check tracing.endpoint and the collector)'),
  );

  const ended = (span: RecordedSpan) => batch.add(spanJson(span));
  const ids = new RandomIdGenerator();
  const ratio = settings.sampleRatio < 1 ? new TraceIdRatioBasedSampler(settings.sampleRatio) : null;
  const sampled = (traceId: string) => ratio === null || ratio.shouldSample(ROOT_CONTEXT, traceId).decision === SamplingDecision.RECORD_AND_SAMPLED;
  const tracer: GatewayTracer = {
    captureContent: settings.captureContent,
    exportsTo: endpoint,
    sampleRatio: settings.sampleRatio,
    server(name: string, start: number, headers: IncomingHttpHeaders): TraceSpan {
      const caller = typeof headers.traceparent === 'string' ? parseTraceParent(headers.traceparent) : null;
      const spanId = ids.generateSpanId();
      if (caller === null || !isSpanContextValid(caller)) {
        const traceId = ids.generateTraceId();
        if (!sampled(traceId)) return new ContextSpan(traceId, spanId, undefined);
        return new RecordedSpan(traceId, spanId, undefined, undefined, name, OTLP_SERVER, start, ended);
      }
      const raw = headers.tracestate;
      const state = typeof raw === 'string' && raw ? new TraceState(raw).serialize() || undefined : undefined;
      // The caller decided (parent-based sampling): its flag says whether the trace is recorded.
      if ((caller.traceFlags & 1) === 0) return new ContextSpan(caller.traceId, spanId, state);
      return new RecordedSpan(caller.traceId, spanId, caller.spanId, state, name, OTLP_SERVER, start, ended);
    },
    client(parent: TraceSpan, name: string): TraceSpan {
      return new RecordedSpan(parent.traceId, ids.generateSpanId(), parent.spanId, parent.traceState, name, OTLP_CLIENT, performance.now(), ended);
    },
  };
  return {
    tracer,
    async shutdown() {
      await batch.stop();
      await delegate.shutdown();
    },
  };
}
