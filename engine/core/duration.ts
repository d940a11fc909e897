// Durations in config are strings with a unit ("500ms", "5s", "5m"); the engine works in milliseconds.
const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };
export const DURATION_PATTERN = '^[0-9]+(\\.[0-9]+)?(ms|s|m|h)$';
export const DURATION = new RegExp(DURATION_PATTERN);

/** Is this a schema pattern of a duration (the config's duration and positive_duration, profiles')? */
export const isDurationPattern = (pattern: unknown): boolean => typeof pattern === 'string' && pattern.endsWith('(ms|s|m|h)$');

/** What to write instead of a bare number where a duration is due: 5 → 5s; 5000 → 5000ms (5s). */
export function durationHint(n: number): string {
  return n >= 1000 && Number.isInteger(n) ? `write ${n}ms, or ${n / 1000}s` : `write ${n}s`;
}

export function parseDuration(text: string): number {
  const m = DURATION.exec(text);
  if (!m) throw new Error(`"${text}" is not a duration; write a number with a unit: 500ms, 5s, 5m, 1h`);
  const ms = parseFloat(text) * UNIT_MS[m[2]];
  // A positive duration never rounds down to zero (a zero interval would spin).
  return ms > 0 ? Math.max(1, Math.round(ms)) : 0;
}

/** A duration string with a unit, for headers and status output: "0.412ms", "1.25s". */
export function formatDuration(ms: number): string {
  if (ms < 1000) return `${Math.round(ms * 1000) / 1000}ms`;
  if (ms < 60_000) return `${Math.round(ms) / 1000}s`;
  return `${Math.round(ms / 100) / 600}m`;
}
