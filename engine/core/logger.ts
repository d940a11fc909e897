// pino: JSON lines (logging.format: json), or one readable line an entry (text: log-text.ts).
// Request logs carry paths without query strings and never headers, so credentials have no way
// in; redaction is a second guard for plugin authors, and applies before either format.
import { pino, type DestinationStream, type Logger } from 'pino';
import { textDestination } from './log-text.js';

const CENSOR = '[redacted]';
/** Fields censored whole, at the top of an entry. */
const SECRET_FIELDS = new Set(['headers', 'auth', 'authorization', 'password', 'token']);
/** Fields censored one level down (`endpoint.password`). */
const SECRET_MEMBERS = new Set(['authorization', 'password', 'token']);

/** The entry with its secrets censored: itself when it has none (the usual case: no copy). Not
 *  pino's `redact` paths: its wildcard (`*.password`) runs for every field of every line, a
 *  seventh of what a proxied request costs. */
export function redacted(entry: Record<string, unknown>): Record<string, unknown> {
  let out = entry;
  for (const name in entry) {
    const value = entry[name];
    let censored: unknown;
    if (SECRET_FIELDS.has(name)) censored = CENSOR;
    else if (typeof value === 'object' && value !== null && !Array.isArray(value)) censored = withoutSecrets(value as Record<string, unknown>);
    else continue;
    if (censored === value) continue;
    if (out === entry) out = { ...entry };
    out[name] = censored;
  }
  return out;
}

/** A member object with its secret fields censored (a copy, keeping an error an error); itself when it has none. */
function withoutSecrets(value: Record<string, unknown>): Record<string, unknown> {
  let out = value;
  for (const name in value) {
    if (!SECRET_MEMBERS.has(name)) continue;
    if (out === value) {
      out = Object.assign(Object.create(Object.getPrototypeOf(value)), value);
      if (value instanceof Error) Object.assign(out, { message: value.message, stack: value.stack });
    }
    out[name] = CENSOR;
  }
  return out;
}

export function createLogger(level: string, destination?: DestinationStream, format: 'json' | 'text' = 'json'): Logger {
  const options = { level, base: { service: 'gw' }, formatters: { log: redacted } };
  if (format === 'text') return pino(options, textDestination(destination ?? pino.destination(1)));
  return destination ? pino(options, destination) : pino(options);
}
