// The gateway's spans: a request's SERVER span and its attempts' CLIENT spans, kept as the few
// fields an export needs (ids, name, kind, times, attributes as a flat list, an error) and handed
// to the batch when they end. A trace the sampler leaves out gets a span that only carries its
// context on to the engine. No SDK object is made per request: tracing on costs what the spans
// say (bench/RESULTS.md, issue 33).
import type { AttributeValue, TraceSpan } from './tracing.js';

export class RecordedSpan implements TraceSpan {
  readonly recording = true;
  /** [key, value, key, value…], in the order set. */
  readonly attrs: unknown[] = [];
  /** performance.now() time of the end; -1 while open. */
  endMs = -1;
  /** Set when the span failed (its status is ERROR), with the message ('' for none). */
  errorMessage: string | undefined = undefined;

  constructor(
    readonly traceId: string,
    readonly spanId: string,
    readonly parentSpanId: string | undefined,
    readonly traceState: string | undefined,
    readonly name: string,
    /** OTLP's SpanKind number (otlp-json.ts). */
    readonly kind: number,
    readonly startMs: number,
    private readonly ended: (span: RecordedSpan) => void,
  ) {}

  set(key: string, value: AttributeValue): void {
    if (this.endMs < 0) this.attrs.push(key, value);
  }

  fail(message = ''): void {
    this.errorMessage = message;
  }

  end(atMs: number): void {
    if (this.endMs >= 0) return;
    this.endMs = Math.max(atMs, this.startMs);
    this.ended(this);
  }
}

/** A span of a trace that is not recorded: its context goes on (flagged not sampled), nothing else. */
export class ContextSpan implements TraceSpan {
  readonly recording = false;
  constructor(
    readonly traceId: string,
    readonly spanId: string,
    readonly traceState: string | undefined,
  ) {}
  set(): void {}
  fail(): void {}
  end(): void {}
}
