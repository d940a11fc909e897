// Reading one stream event from its bytes, without decoding it: whether its data is a JSON object
// by its first and last bytes (then its latin1 text, for the stream shape's mayMatter), and where
// an SSE field's value starts. StreamWatch's readers (stream-watch.ts).
//
// After the first content, most events are more of the same (a token). Parsing each costs about
// a microsecond and its garbage; instead an event is checked for shape (a JSON object: `{` … `}`)
// and parsed only when the shape's `mayMatter` says it may end the stream or carry an error.

export const LF = 0x0a;
export const CR = 0x0d;
export const COLON = 0x3a;
export const OPEN_BRACE = 0x7b;
const SPACE = 0x20;
const CLOSE_BRACE = 0x7d;
const QUOTE = 0x22;
/** Bytes a JSON value can end with (a string, object or array, a number, true/false/null): 1. */
const VALUE_END = new Uint8Array(256);
for (const c of '"}]el0123456789') VALUE_END[c.charCodeAt(0)] = 1;

const isBlank = (c: number) => c === SPACE || c === 0x09 || c === CR;

type Latin1 = Buffer & { latin1Slice?: (start: number, end: number) => string };
/** buf[s..e) as latin1 text. Buffer's own latin1Slice (what toString('latin1') calls after
 *  reading its arguments) when Node has it: a thousand instructions less an event (callgrind). */
const latin1: (buf: Buffer, s: number, e: number) => string =
  typeof (Buffer.prototype as Latin1).latin1Slice === 'function'
    ? (buf, s, e) => (buf as Latin1).latin1Slice!(s, e)
    : (buf, s, e) => buf.toString('latin1', s, e);

/** buf[s..e) (one event's data) as latin1 text when it is a JSON object by its first and last
 *  bytes; null: it is not. */
export function objectText(buf: Buffer, s: number, e: number): string | null {
  while (s < e && isBlank(buf[s])) s++;
  while (e > s && isBlank(buf[e - 1])) e--;
  if (e - s < 2 || buf[s] !== OPEN_BRACE || buf[e - 1] !== CLOSE_BRACE) return null;
  // Inside: a key first (or nothing), and a JSON value's last byte before the brace.
  let i = s + 1;
  while (i < e - 1 && isBlank(buf[i])) i++;
  let j = e - 2;
  while (j > i && isBlank(buf[j])) j--;
  if (buf[i] === CLOSE_BRACE ? i !== e - 1 : buf[i] !== QUOTE || VALUE_END[buf[j]] !== 1) return null;
  return latin1(buf, s, e);
}

/** Whether buf[s..e) is `field` followed by ':' or the line's end; returns where its value starts, or -1. */
export function fieldValue(buf: Buffer, s: number, e: number, field: string): number {
  const n = field.length;
  if (e - s < n) return -1;
  for (let i = 0; i < n; i++) if (buf[s + i] !== field.charCodeAt(i)) return -1;
  if (s + n === e) return e;
  if (buf[s + n] !== COLON) return -1;
  // One space after the colon is part of the syntax, not the value.
  return buf[s + n + 1] === SPACE ? s + n + 2 : s + n + 1;
}
