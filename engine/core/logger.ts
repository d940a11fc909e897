// pino: JSON lines (logging.format: json), or one readable line an entry (text: log-text.ts).
// Request logs carry paths without query strings and never headers, so credentials have no way
// in; redaction is a second guard for plugin authors, and applies before either format.
import { pino, type DestinationStream, type Logger } from 'pino';
import { textDestination } from './log-text.js';

export function createLogger(level: string, destination?: DestinationStream, format: 'json' | 'text' = 'json'): Logger {
  const options = {
    level,
    base: { service: 'gw' },
    redact: { paths: ['*.authorization', '*.password', '*.token', 'headers', 'auth'], censor: '[redacted]' },
  };
  if (format === 'text') return pino(options, textDestination(destination ?? pino.destination(1)));
  return destination ? pino(options, destination) : pino(options);
}
