// Backend versions as configured per endpoint (`version: "0.11.1"`, llama.cpp's `b4847`),
// compared with the minimum a profile feature needs (api.msgapi_support.min_version).

/** Numeric comparison of versions such as 0.11.1 or b4847; undefined when either has no number. */
export function compareVersions(a: string, b: string): number | undefined {
  const pa = a.match(/\d+/g)?.map(Number);
  const pb = b.match(/\d+/g)?.map(Number);
  if (!pa || !pb) return undefined;
  for (let i = 0; i < Math.max(pa.length, pb.length); i++) {
    const d = (pa[i] ?? 0) - (pb[i] ?? 0);
    if (d) return Math.sign(d);
  }
  return 0;
}

/** No minimum, no configured version, or a version that cannot be compared: assumed recent
 *  enough; else the version is at least the minimum. */
export function recentEnough(version: string | undefined, min: string | undefined): boolean {
  return !(min && version && (compareVersions(version, min) ?? 0) < 0);
}
