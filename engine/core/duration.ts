// Durations in config are strings with a unit ("500ms", "5s", "5m"); the engine works in milliseconds.
const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };
export const DURATION_PATTERN = '^[0-9]+(\\.[0-9]+)?(ms|s|m|h)$';
const DURATION = new RegExp(DURATION_PATTERN);

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
