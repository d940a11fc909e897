// An OTLP/HTTP traces receiver on loopback, as a collector (Jaeger, Tempo, an OpenTelemetry
// Collector) is one: it keeps each export's path and headers and decodes its JSON body into
// spans, checking on the way what a collector would reject (a key twice on one span, an id that
// is not hex of the right length, times that are not decimal nanoseconds).
import { once } from 'node:events';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface SinkSpan {
  traceId: string;
  spanId: string;
  parentSpanId: string | undefined;
  traceState: string | undefined;
  name: string;
  /** OTLP's numbers: 2 SERVER, 3 CLIENT. */
  kind: number;
  startNs: bigint;
  endNs: bigint;
  attributes: Record<string, unknown>;
  /** OTLP's numbers: 0 unset, 2 error. */
  status: { code: number; message?: string };
  resource: Record<string, unknown>;
}

export interface Export {
  path: string;
  headers: IncomingHttpHeaders;
  body: any;
}

const HEX = (n: number) => new RegExp(`^[0-9a-f]{${n}}$`);

function value(v: any): unknown {
  if ('stringValue' in v) return v.stringValue;
  if ('intValue' in v) return Number(v.intValue);
  if ('doubleValue' in v) return v.doubleValue;
  if ('boolValue' in v) return v.boolValue;
  if ('arrayValue' in v) return (v.arrayValue.values ?? []).map(value);
  throw new Error(`an attribute value of no OTLP type: ${JSON.stringify(v)}`);
}

function attributes(list: any[] = []): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const a of list) {
    if (a.key in out) throw new Error(`attribute ${a.key} twice on one span`);
    out[a.key] = value(a.value);
  }
  return out;
}

function decode(body: any): SinkSpan[] {
  const spans: SinkSpan[] = [];
  for (const rs of body.resourceSpans ?? []) {
    const resource = attributes(rs.resource?.attributes);
    for (const ss of rs.scopeSpans ?? [])
      for (const s of ss.spans ?? []) {
        if (!HEX(32).test(s.traceId) || !HEX(16).test(s.spanId) || (s.parentSpanId && !HEX(16).test(s.parentSpanId)))
          throw new Error(`bad ids: ${JSON.stringify(s)}`);
        if (!/^\d+$/.test(s.startTimeUnixNano) || !/^\d+$/.test(s.endTimeUnixNano)) throw new Error(`bad times: ${JSON.stringify(s)}`);
        spans.push({
          traceId: s.traceId,
          spanId: s.spanId,
          parentSpanId: s.parentSpanId || undefined,
          traceState: s.traceState,
          name: s.name,
          kind: s.kind,
          startNs: BigInt(s.startTimeUnixNano),
          endNs: BigInt(s.endTimeUnixNano),
          attributes: attributes(s.attributes),
          status: s.status ?? { code: 0 },
          resource,
        });
      }
  }
  return spans;
}

export class OtlpSink {
  readonly exports: Export[] = [];
  spans: SinkSpan[] = [];
  /** What could not be decoded (a test expects none). */
  readonly errors: string[] = [];
  private server: Server | null = null;
  url = '';

  async start(): Promise<this> {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        try {
          const body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
          this.exports.push({ path: req.url ?? '', headers: req.headers, body });
          this.spans.push(...decode(body));
          res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
        } catch (err) {
          this.errors.push(String(err));
          res.writeHead(400).end();
        }
      });
    }).listen(0, '127.0.0.1');
    await once(this.server, 'listening');
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/v1/traces`;
    return this;
  }

  reset(): void {
    this.exports.length = 0;
    this.spans = [];
  }

  async stop(): Promise<void> {
    this.server?.close();
    this.server?.closeAllConnections();
  }
}
