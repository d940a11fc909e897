// The OTLP/JSON body of a batch of the gateway's spans (the protobuf JSON mapping of
// ExportTraceServiceRequest: hex ids, times as decimal nanosecond strings, attributes as
// {key, value: {stringValue | intValue | doubleValue | boolValue | arrayValue}}), written as text
// in one pass. The SDK's generic serializer builds an object tree per span and stringifies it:
// measured at about 2 k instructions per attribute, more than half of a recorded request's cost
// (bench/RESULTS.md, issue 33); the gateway's two span shapes need none of that.
import type { RecordedSpan } from './recorded-span.js';

/** OTLP's SpanKind numbers (the API's plus one). */
export const OTLP_SERVER = 2;
export const OTLP_CLIENT = 3;

/** Unix nanoseconds, as OTLP/JSON writes them, of a performance.now() time: whole milliseconds
 *  and the nanoseconds after them, kept apart (their sum is past 2^53). */
export function unixNanos(perfMs: number): string {
  const out: string[] = [];
  pushNanos(out, perfMs);
  return out.join('');
}

function pushNanos(out: string[], perfMs: number): void {
  const ms = performance.timeOrigin + perfMs;
  const whole = Math.floor(ms);
  const ns = Math.min(999_999, Math.round((ms - whole) * 1e6));
  out.push(String(whole), ns >= 100_000 ? String(ns) : String(ns).padStart(6, '0'));
}

/** Printable ASCII without a quote or a backslash: written as it is (the common case: names,
 *  paths, ids); anything else goes through JSON.stringify. (A loop: a third of a regular
 *  expression's cost on strings this short.) */
function plain(v: string): boolean {
  for (let i = 0; i < v.length; i++) {
    const c = v.charCodeAt(i);
    if (c < 0x20 || c > 0x7e || c === 0x22 || c === 0x5c) return false;
  }
  return true;
}
const text = (v: string): string => (plain(v) ? `"${v}"` : JSON.stringify(v));

/** Set while a span is written when a string in it was not plain (it may hold characters past
 *  ASCII, which UTF-8 encodes in more than one byte). */
let escaped = false;

/** A JSON string pushed on `out` as flat pieces (no string is concatenated: the span's one join
 *  copies each piece once). */
function pushText(out: string[], v: string): void {
  if (plain(v)) out.push('"', v, '"');
  else {
    escaped = true;
    out.push(JSON.stringify(v));
  }
}

/** What an attribute's value is written as: the start of its JSON (`{"key":"k","value":` and the
 *  value's type) is one piece per key and type, written once. */
enum Kind {
  /** A plain string: the prefix ends with its opening quote. */
  Plain,
  Text,
  Int,
  Double,
  Bool,
  List,
}
const OPENING = ['{"stringValue":"', '{"stringValue":', '{"intValue":"', '{"doubleValue":', '{"boolValue":', '{"arrayValue":{"values":['];
/** Closing an attribute (its value and itself), and an item of an array. */
const CLOSING = ['"}}', '}}', '"}}', '}}', '}}', ']}}}'];
const ITEM_CLOSING = ['"}', '}', '"}', '}', '}'];

const prefixes = new Map<string, string[]>();
const KEYS_KEPT = 256;
/** The attribute's opening piece; `after`: it follows another (the piece begins with the comma). */
function prefix(key: string, kind: Kind, after: boolean): string {
  let byKind = prefixes.get(key);
  if (byKind === undefined) {
    byKind = [];
    if (!plain(key)) escaped = true;
    else if (prefixes.size < KEYS_KEPT) prefixes.set(key, byKind);
  }
  const at = kind * 2 + (after ? 1 : 0);
  // Joined, so the piece kept is flat (a template's result may be a tree of parts).
  return (byKind[at] ??= [after ? ',{"key":' : '{"key":', text(key), ',"value":', OPENING[kind]].join(''));
}

/** What OTLP writes `v` as; undefined: a value it has no type for (left out). */
function kindOf(v: unknown): Kind | undefined {
  switch (typeof v) {
    case 'string':
      return plain(v) ? Kind.Plain : Kind.Text;
    case 'number':
      return Number.isSafeInteger(v) ? Kind.Int : Number.isFinite(v) ? Kind.Double : undefined;
    case 'boolean':
      return Kind.Bool;
    default:
      return Array.isArray(v) ? Kind.List : undefined;
  }
}

/** An array's items (strings, numbers, booleans), each as an AnyValue. */
function pushItems(out: string[], items: readonly unknown[]): void {
  let first = true;
  for (const item of items) {
    const kind = typeof item === 'object' ? undefined : kindOf(item);
    if (kind === undefined) continue;
    if (!first) out.push(',');
    first = false;
    out.push(OPENING[kind]);
    pushBare(out, kind, item);
    out.push(ITEM_CLOSING[kind]);
  }
}

/** A value after its opening piece. */
function pushBare(out: string[], kind: Kind, v: unknown): void {
  if (kind === Kind.Plain) out.push(v as string);
  else if (kind === Kind.Text) {
    escaped = true;
    out.push(JSON.stringify(v));
  } else if (kind === Kind.List) pushItems(out, v as unknown[]);
  else out.push(String(v));
}

/** [key, value, key, value…] as an OTLP attribute list, its parts pushed on `out`. */
function pushAttributes(out: string[], list: readonly unknown[]): void {
  out.push('[');
  let first = true;
  for (let i = 0; i < list.length; i += 2) {
    const v = list[i + 1];
    const kind = kindOf(v);
    if (kind === undefined) continue;
    out.push(prefix(list[i] as string, kind, !first));
    first = false;
    pushBare(out, kind, v);
    out.push(CLOSING[kind]);
  }
  out.push(']');
}

/** The pieces of the span being written: one array, reused (spans are written one at a time). */
const parts: string[] = [];

/** A span's OTLP/JSON text; `ascii`: every character is ASCII (its UTF-8 bytes are its
 *  characters, copied rather than encoded). */
export interface SpanText {
  text: string;
  ascii: boolean;
}

/** An ended span as the OTLP/JSON text of one element of `spans`, written when it ends (the batch
 *  keeps its bytes, not its objects). */
export function spanJson(s: RecordedSpan): SpanText {
  escaped = false;
  const out = parts;
  out.length = 0;
  out.push('{"traceId":"', s.traceId, '","spanId":"', s.spanId, '"');
  if (s.parentSpanId) out.push(',"parentSpanId":"', s.parentSpanId, '"');
  if (s.traceState) {
    out.push(',"traceState":');
    pushText(out, s.traceState);
  }
  out.push(',"name":');
  pushText(out, s.name);
  out.push(s.kind === OTLP_SERVER ? ',"kind":2,"startTimeUnixNano":"' : ',"kind":3,"startTimeUnixNano":"');
  pushNanos(out, s.startMs);
  out.push('","endTimeUnixNano":"');
  pushNanos(out, s.endMs);
  out.push('","attributes":');
  pushAttributes(out, s.attrs);
  if (s.errorMessage) {
    out.push(',"status":{"code":2,"message":');
    pushText(out, s.errorMessage);
    out.push('}');
  } else if (s.errorMessage !== undefined) out.push(',"status":{"code":2}');
  out.push('}');
  const json = out.join('');
  out.length = 0;
  return { text: json, ascii: !escaped };
}

/** What is the same in every export: the resource (service.name, …) and the scope. */
export interface ExportHead {
  resource: readonly unknown[];
  scope: { name: string; version: string };
}

/** The bytes around a batch's spans, written once. */
export function exportFrame(head: ExportHead): [Buffer, Buffer] {
  const resource: string[] = [];
  pushAttributes(resource, head.resource);
  const scope = `{"name":${text(head.scope.name)},"version":${text(head.scope.version)}}`;
  return [Buffer.from(`{"resourceSpans":[{"resource":{"attributes":${resource.join('')}},"scopeSpans":[{"scope":${scope},"spans":[`), Buffer.from(']}]}]}')];
}

/** A batch's spans (SpanBatch's bytes) as the body of one OTLP/HTTP JSON export. */
export function exportBody(frame: readonly [Buffer, Buffer], spans: Buffer): Uint8Array {
  return Buffer.concat([frame[0], spans, frame[1]]);
}
