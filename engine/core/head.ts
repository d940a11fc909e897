// Header values from request data or a backend: Node throws on characters HTTP forbids, and a
// throw while answering once ended the process. A value echoed from a request goes through
// echo() (encoded, never rejected, short enough for any client to read); the head writer
// (response.ts) encodes whatever else Node refuses.

/** Echoed values are cut here: a 100 KB model name must not become a 100 KB response head. */
export const ECHO_MAX = 256;

// Visible ASCII, space and tab: what any client reads back unchanged.
const PLAIN = /^[\t\x20-\x7e]*$/;

/** Percent-encode what is not plain ASCII (control characters, CR/LF, NUL, anything past
 *  0x7E, as UTF-8) and cut to `max` characters without splitting an escape. */
export function echo(value: string, max = ECHO_MAX): string {
  if (value.length <= max && PLAIN.test(value)) return value;
  let out = '';
  for (const ch of value) {
    const c = ch.codePointAt(0)!;
    const piece = c === 0x09 || (c >= 0x20 && c <= 0x7e) ? ch : encodeBytes(ch);
    if (out.length + piece.length > max) break;
    out += piece;
  }
  return out;
}

function encodeBytes(ch: string): string {
  let out = '';
  // A lone surrogate is not encodable as UTF-8: Buffer writes it as U+FFFD.
  for (const b of Buffer.from(ch, 'utf8')) out += `%${b.toString(16).toUpperCase().padStart(2, '0')}`;
  return out;
}

/** Cut a value quoted in a message or log line (not a header: no encoding needed there). */
export function clip(value: unknown, max = ECHO_MAX): string {
  const s = String(value);
  return s.length <= max ? s : `${s.slice(0, max)}… (${s.length} characters)`;
}

const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

/** The headers with every value encoded where Node would refuse it; a name it refuses dropped. */
export function sanitizedHeaders(headers: string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < headers.length; i += 2) {
    const name = headers[i];
    if (!TOKEN.test(name)) continue;
    out.push(name, echo(String(headers[i + 1]), Infinity));
  }
  return out;
}

/** A Retry-After value (seconds or an HTTP date) in milliseconds from now; undefined when absent or unreadable. */
export function retryAfterMs(value: string | string[] | undefined, now = Date.now()): number | undefined {
  const v = Array.isArray(value) ? value[0] : value;
  if (!v) return undefined;
  if (/^\d+$/.test(v.trim())) return Number(v) * 1000;
  const at = Date.parse(v);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}
