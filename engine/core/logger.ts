// pino, JSON lines. Request logs carry paths without query strings and never headers, so
// credentials have no way in; redaction is a second guard for plugin authors.
import { pino, type DestinationStream, type Logger } from 'pino';

export function createLogger(level: string, destination?: DestinationStream): Logger {
  const options = {
    level,
    base: { service: 'gw' },
    redact: { paths: ['*.authorization', '*.password', '*.token', 'headers', 'auth'], censor: '[redacted]' },
  };
  return destination ? pino(options, destination) : pino(options);
}
