// logging.format: text — pino's JSON lines rewritten as one readable line each, for a terminal:
//   2026-05-04T10:00:00.000Z INFO  request req=req-1 method=GET path=/gw/models status=200 ms=1.2
// The time (ISO 8601, UTC), the level's name, the message, then the fields as key=value, nested
// objects flattened with dots (err.message=…), as logfmt and Go's slog text handler write them. A
// string with spaces, quotes, "=" or control characters is JSON-quoted and an array written as
// JSON, so a client-sent path cannot break a line or send escape sequences to the terminal. pino
// redacts before it writes, so a secret never reaches this. Costs one JSON.parse a line: for
// people reading, not for log shippers.
import { pino, type DestinationStream } from 'pino';

const LABELS: Record<number, string> = Object.fromEntries(Object.entries(pino.levels.labels).map(([n, l]) => [n, l.toUpperCase().padEnd(5)]));
/** Left out of the fields: shown at the front, or the same on every line. */
const FRONT = new Set(['level', 'time', 'msg', 'service']);
// Control characters are what these look for: a value holding one is quoted and escaped.
// biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is the point
const PLAIN = /^[^\s"=\\\x00-\x1f\x7f-\x9f]+$/;
// biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is the point
const CONTROL = /[\x00-\x1f\x7f-\x9f]/;

/** As JSON, with the controls JSON leaves alone (DEL, C1) escaped too. */
const json = (v: unknown) => JSON.stringify(v).replace(/[\x7f-\x9f]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);

function fields(obj: Record<string, unknown>, prefix: string, out: string[]): void {
  for (const key of Object.keys(obj)) {
    if (!prefix && FRONT.has(key)) continue;
    const v = obj[key];
    const name = prefix + key;
    if (v === undefined) continue;
    if (v !== null && typeof v === 'object' && !Array.isArray(v)) fields(v as Record<string, unknown>, `${name}.`, out);
    else if (typeof v === 'string') out.push(`${name}=${PLAIN.test(v) ? v : json(v)}`);
    // Numbers, booleans, null as they are; an array as JSON.
    else out.push(`${name}=${typeof v === 'object' ? json(v) : String(v)}`);
  }
}

/** One pino JSON line as a text line (the line as it came when it is not JSON: nothing is lost). */
export function textLine(line: string): string {
  let entry: Record<string, unknown>;
  try {
    entry = JSON.parse(line);
  } catch {
    return line;
  }
  const time = typeof entry.time === 'number' ? new Date(entry.time).toISOString() : String(entry.time);
  const out = [time, LABELS[entry.level as number] ?? String(entry.level).padEnd(5)];
  if (typeof entry.msg === 'string') out.push(CONTROL.test(entry.msg) ? json(entry.msg) : entry.msg);
  fields(entry, '', out);
  return `${out.join(' ')}\n`;
}

/** A destination that writes text lines to `to`. */
export function textDestination(to: DestinationStream): DestinationStream {
  const flushable = to as DestinationStream & { flush?: (cb?: (err?: Error) => void) => void; flushSync?: () => void };
  return {
    write: (line: string) => to.write(textLine(line)),
    ...(flushable.flush && { flush: (cb?: (err?: Error) => void) => flushable.flush!(cb) }),
    ...(flushable.flushSync && { flushSync: () => flushable.flushSync!() }),
  } as DestinationStream;
}
