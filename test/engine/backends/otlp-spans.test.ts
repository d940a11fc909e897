// The gateway's spans as they leave: OTLP/JSON written in one pass (each value under its OTLP
// type, text escaped, times as Unix nanoseconds), batched by size and delay with a bounded queue,
// and sampled as OpenTelemetry's parent-based ratio sampler does (a caller's flag decides for its
// trace; a malformed or all-zero traceparent begins a new one).
import { describe, expect, it } from 'vitest';
import pino from 'pino';
import { exportBody, exportFrame, spanJson, unixNanos } from '../../../engine/backends/otlp-json.js';
import { provide } from '../../../engine/backends/otel.js';
import { RecordedSpan } from '../../../engine/backends/recorded-span.js';
import { SpanBatch } from '../../../engine/backends/span-batch.js';

const span = (attrs: unknown[], name = 'chat "m"\n') => {
  const s = new RecordedSpan('0af7651916cd43dd8448eb211c80319c', 'b7ad6b7169203331', '00f067aa0ba902b7', 'v=1', name, 3, 10, () => {});
  for (let i = 0; i < attrs.length; i += 2) s.set(attrs[i] as string, attrs[i + 1] as never);
  return s;
};

describe('OTLP/JSON', () => {
  it('writes each attribute under its OTLP type, escapes text, and leaves out what has no type', () => {
    const s = span(['s', 'a "quoted"\u2028 line', 'i', 42, 'd', 0.5, 'b', true, 'list', ['stop', 'length'], 'nan', Number.NaN, 'obj', {}]);
    s.fail('broke "off"');
    s.end(12.5);
    const body = JSON.parse(
      new TextDecoder().decode(
        exportBody(exportFrame({ resource: ['service.name', 'gw'], scope: { name: 'x', version: '1' } }), Buffer.from(spanJson(s).text)),
      ),
    );
    const [out] = body.resourceSpans[0].scopeSpans[0].spans;
    expect(body.resourceSpans[0].resource.attributes).toEqual([{ key: 'service.name', value: { stringValue: 'gw' } }]);
    expect(out).toMatchObject({
      traceId: '0af7651916cd43dd8448eb211c80319c',
      spanId: 'b7ad6b7169203331',
      parentSpanId: '00f067aa0ba902b7',
      traceState: 'v=1',
      name: 'chat "m"\n',
      kind: 3,
      status: { code: 2, message: 'broke "off"' },
    });
    expect(out.attributes).toEqual([
      { key: 's', value: { stringValue: 'a "quoted"\u2028 line' } },
      { key: 'i', value: { intValue: '42' } },
      { key: 'd', value: { doubleValue: 0.5 } },
      { key: 'b', value: { boolValue: true } },
      { key: 'list', value: { arrayValue: { values: [{ stringValue: 'stop' }, { stringValue: 'length' }] } } },
    ]);
    expect(BigInt(out.endTimeUnixNano) - BigInt(out.startTimeUnixNano)).toBe(2_500_000n);
  });

  it('times are Unix nanoseconds, the fraction of a millisecond carried into the whole', () => {
    const ns = BigInt(unixNanos(performance.now()));
    expect(Number(ns / 1_000_000n)).toBeGreaterThan(Date.now() - 1000);
    expect(Number(ns / 1_000_000n)).toBeLessThan(Date.now() + 1000);
    for (const ms of [0, 0.0000001, 0.9999999, 1234.5678901]) expect(unixNanos(ms)).toMatch(/^\d{19}$/);
  });

  it('a span set after its end, or ended twice, changes nothing', () => {
    const ended: RecordedSpan[] = [];
    const s = new RecordedSpan('0af7651916cd43dd8448eb211c80319c', 'b7ad6b7169203331', undefined, undefined, 'n', 2, 5, (x) => ended.push(x));
    s.end(4);
    s.set('late', 1);
    s.end(9);
    expect(ended).toHaveLength(1);
    expect(s.endMs).toBe(5);
    expect(s.attrs).toEqual([]);
  });
});

describe('the batch', () => {
  it('leaves when it holds 512 spans; while four exports are under way, a fifth batch is dropped and said once', async () => {
    const sent: number[] = [];
    const warned: [number, string | undefined][] = [];
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    const batch = new SpanBatch(
      async (spans) => {
        sent.push(spans.count);
        await held;
      },
      60_000,
      (n, why) => warned.push([n, why]),
    );
    for (let i = 0; i < 6 * 512 + 7; i++) batch.add(spanJson(span([])));
    expect(sent).toEqual([512, 512, 512, 512]);
    expect(warned).toEqual([[512, 'the collector does not keep up']]);
    // Once the exports end, what is held leaves at stop.
    release();
    await new Promise((r) => setImmediate(r));
    await batch.stop();
    expect(sent).toEqual([512, 512, 512, 512, 7]);
  });

  it("sends what it holds after the delay, as the spans' JSON texts comma-separated in UTF-8", async () => {
    const sent: { bytes: Buffer; count: number }[] = [];
    const batch = new SpanBatch(
      async (spans) => void sent.push(spans),
      5,
      () => {},
    );
    batch.add(spanJson(span(['prompt', 'héllo wörld ✓ 🦊'])));
    batch.add(spanJson(span([])));
    const deadline = Date.now() + 10_000;
    while (sent.length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
    expect(sent.map((b) => b.count)).toEqual([2]);
    const spans = JSON.parse(`[${sent[0].bytes.toString('utf8')}]`);
    expect(spans[0].attributes).toEqual([{ key: 'prompt', value: { stringValue: 'héllo wörld ✓ 🦊' } }]);
    expect(spans).toHaveLength(2);
    // Plain ASCII is copied as it is; text past ASCII is encoded.
    expect(spanJson(span(['model', 'm'], 'chat m')).ascii).toBe(true);
    expect(spanJson(span(['prompt', 'héllo'], 'chat m')).ascii).toBe(false);
    expect(spanJson(span(['q', 'a "quote"'], 'chat m')).ascii).toBe(false);
    expect(spanJson(span([], 'chat "m"')).ascii).toBe(false);
  });

  it('leaves before 1 MiB: large spans (captured prompts) make smaller batches', async () => {
    const sent: { bytes: Buffer; count: number }[] = [];
    const batch = new SpanBatch(
      async (spans) => void sent.push(spans),
      60_000,
      () => {},
    );
    const big = spanJson(span(['gen_ai.input.messages', 'x'.repeat(16_384)]));
    for (let i = 0; i < 100; i++) batch.add(big);
    await batch.stop();
    expect(sent.reduce((n, b) => n + b.count, 0)).toBe(100);
    expect(sent.length).toBeGreaterThan(1);
    for (const b of sent) {
      expect(b.bytes.length).toBeLessThanOrEqual(1 << 20);
      expect(JSON.parse(`[${b.bytes.toString('utf8')}]`)).toHaveLength(b.count);
    }
  });
});

describe('sampling and trace context', () => {
  const log = pino({ level: 'silent' });
  const tracerAt = (ratio: number) =>
    provide(
      { endpoint: 'http://127.0.0.1:9/v1/traces', headers: {}, serviceName: 's', sampleRatio: ratio, captureContent: false, batchDelayMs: 60_000 },
      '1',
      log,
    );

  it("follows a caller's sampled flag, whatever the ratio", async () => {
    const p = tracerAt(0);
    const on = p.tracer.server('n', 0, { traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01', tracestate: 'a=1,b=2' });
    expect(on).toMatchObject({ recording: true, traceId: '4bf92f3577b34da6a3ce929d0e0e4736', traceState: 'a=1,b=2' });
    const off = tracerAt(1).tracer.server('n', 0, { traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00' });
    expect(off).toMatchObject({ recording: false, traceId: '4bf92f3577b34da6a3ce929d0e0e4736' });
    expect(off.spanId).not.toBe('00f067aa0ba902b7');
    await p.shutdown();
  });

  it('begins a new trace for a malformed or all-zero traceparent, sampled by the ratio', () => {
    const { tracer } = tracerAt(1);
    for (const bad of ['00-00000000000000000000000000000000-00f067aa0ba902b7-01', 'ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01', 'nonsense']) {
      const s = tracer.server('n', 0, { traceparent: bad });
      expect(s.recording).toBe(true);
      expect(s.traceId).toMatch(/^[0-9a-f]{32}$/);
      expect(s.traceId).not.toBe('4bf92f3577b34da6a3ce929d0e0e4736');
    }
    const none = tracerAt(0).tracer;
    expect(Array.from({ length: 50 }, () => none.server('n', 0, {}).recording)).not.toContain(true);
    const tenth = tracerAt(0.1).tracer;
    const kept = Array.from({ length: 2000 }, () => tenth.server('n', 0, {}).recording).filter(Boolean).length;
    expect(kept).toBeGreaterThan(100);
    expect(kept).toBeLessThan(320);
  });

  it("an attempt's span is a child of the request's, in its trace", () => {
    const { tracer } = tracerAt(1);
    const server = tracer.server('n', 0, {});
    const client = tracer.client(server, 'chat m') as RecordedSpan;
    expect(client).toMatchObject({ traceId: server.traceId, parentSpanId: server.spanId, kind: 3 });
  });
});
