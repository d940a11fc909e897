// The OTLP/JSON text of the gateway's spans (the protobuf JSON mapping of
// ExportTraceServiceRequest: hex ids, times as decimal nanosecond strings, attributes as
// {key, value: {stringValue | intValue | doubleValue | boolValue | arrayValue}}), written in one
// pass by concatenation: the attribute's opening (`{"key":"k","value":{"stringValue":"`) is one
// string per key and type, made once. The SDK's generic serializer builds an object tree per span
// and stringifies it, about 2 k instructions an attribute; this is a quarter of that, and joining
// pieces with Array.join a third more (bench/RESULTS.md, issue 33).
import type { RecordedSpan } from './recorded-span.js';

/** OTLP's SpanKind numbers (the API's plus one). */
export const OTLP_SERVER = 2;
export const OTLP_CLIENT = 3;

/** Unix nanoseconds, as OTLP/JSON writes them, of a performance.now() time: whole milliseconds
 *  and the nanoseconds after them, kept apart (their sum is past 2^53). */
export function unixNanos(perfMs: number): string {
  const ms = performance.timeOrigin + perfMs;
  const whole = Math.floor(ms);
  const ns = Math.min(999_999, Math.round((ms - whole) * 1e6));
  return String(whole) + (ns >= 100_000 ? String(ns) : String(ns).padStart(6, '0'));
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

/** Set while a span is written when a string in it was not plain (it may hold characters past
 *  ASCII, which UTF-8 encodes in more than one byte). */
let escaped = false;

/** `v` as a JSON string. */
function text(v: string): string {
  if (plain(v)) return `"${v}"`;
  escaped = true;
  return JSON.stringify(v);
}

/** What an attribute's value is written as. */
enum Kind {
  /** A plain string: its opening ends with the quote. */
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

const openings = new Map<string, string[]>();
const KEYS_KEPT = 256;
/** An attribute's opening, up to its value; `after`: it follows another (it begins with the comma). */
function opening(key: string, kind: Kind, after: boolean): string {
  let byKind = openings.get(key);
  if (byKind === undefined) {
    byKind = [];
    if (!plain(key)) escaped = true;
    else if (openings.size < KEYS_KEPT) openings.set(key, byKind);
  }
  // Joined, so the string kept is flat (a concatenation's result is a tree of its parts).
  return (byKind[kind * 2 + (after ? 1 : 0)] ??= [after ? ',{"key":' : '{"key":', text(key), ',"value":', OPENING[kind]].join(''));
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

/** A value after its opening. */
function bare(kind: Kind, v: unknown): string {
  if (kind === Kind.Plain) return v as string;
  if (kind === Kind.Text) {
    escaped = true;
    return JSON.stringify(v);
  }
  return kind === Kind.List ? items(v as unknown[]) : String(v);
}

/** An array's items (strings, numbers, booleans), each as an AnyValue. */
function items(list: readonly unknown[]): string {
  let out = '';
  for (const item of list) {
    const kind = typeof item === 'object' ? undefined : kindOf(item);
    if (kind === undefined) continue;
    out += (out ? ',' : '') + OPENING[kind] + bare(kind, item) + ITEM_CLOSING[kind];
  }
  return out;
}

/** [key, value, key, value…] as an OTLP attribute list. */
function attributes(list: readonly unknown[]): string {
  let out = '[';
  let after = false;
  for (let i = 0; i < list.length; i += 2) {
    const v = list[i + 1];
    const kind = kindOf(v);
    if (kind === undefined) continue;
    out += opening(list[i] as string, kind, after) + bare(kind, v) + CLOSING[kind];
    after = true;
  }
  return `${out}]`;
}

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
  let out = `{"traceId":"${s.traceId}","spanId":"${s.spanId}"`;
  if (s.parentSpanId) out += `,"parentSpanId":"${s.parentSpanId}"`;
  if (s.traceState) out += `,"traceState":${text(s.traceState)}`;
  out += `,"name":${text(s.name)}`;
  out += s.kind === OTLP_SERVER ? ',"kind":2,"startTimeUnixNano":"' : ',"kind":3,"startTimeUnixNano":"';
  out += `${unixNanos(s.startMs)}","endTimeUnixNano":"${unixNanos(s.endMs)}","attributes":${attributes(s.attrs)}`;
  if (s.errorMessage) out += `,"status":{"code":2,"message":${text(s.errorMessage)}}`;
  else if (s.errorMessage !== undefined) out += ',"status":{"code":2}';
  return { text: `${out}}`, ascii: !escaped };
}

/** What is the same in every export: the resource (service.name, …) and the scope. */
export interface ExportHead {
  resource: readonly unknown[];
  scope: { name: string; version: string };
}

/** The bytes around a batch's spans, written once. */
export function exportFrame(head: ExportHead): [Buffer, Buffer] {
  const scope = `{"name":${text(head.scope.name)},"version":${text(head.scope.version)}}`;
  return [
    Buffer.from(`{"resourceSpans":[{"resource":{"attributes":${attributes(head.resource)}},"scopeSpans":[{"scope":${scope},"spans":[`),
    Buffer.from(']}]}]}'),
  ];
}

/** A batch's spans (SpanBatch's bytes) as the body of one OTLP/HTTP JSON export. */
export function exportBody(frame: readonly [Buffer, Buffer], spans: Buffer): Uint8Array {
  return Buffer.concat([frame[0], spans, frame[1]]);
}
