// Reading Prometheus text exposition (/internal/metrics) in tests: samples by name and labels.

/** Every sample of `name` whose labels include `labels`, with its value. */
function* samples(text: string, name: string, labels: Record<string, string>): Generator<number> {
  for (const line of text.split('\n')) {
    if (line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const have = Object.fromEntries([...(m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)].map((x) => [x[1], x[2]]));
    if (Object.entries(labels).every(([k, v]) => have[k] === v)) yield Number(m[3]);
  }
}

/** The value of the first sample `name` whose labels include `labels`; undefined when there is none. */
export function sample(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const value of samples(text, name, labels)) return value;
  return undefined;
}

/** The sum of every sample of `name` whose labels include `labels`. */
export function sampleSum(text: string, name: string, labels: Record<string, string> = {}): number {
  let sum = 0;
  for (const value of samples(text, name, labels)) sum += value;
  return sum;
}
