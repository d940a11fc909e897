// Profile paths with named segments, compiled once at load: `{name}` is one path segment,
// `{name...}` (last only) is the rest of the path, one or more segments, so a model id with a
// slash (`org/model`) fits `/v1/models/{model...}`. Everything else is matched exactly: no
// general wildcards. Exact paths are a Set lookup; the few patterns a profile has are tried only
// when that misses, so an exact path always wins over a pattern.

const PARAM = /^\{([A-Za-z_][A-Za-z0-9_]*)(\.\.\.)?\}$/;
const ESCAPE = /[.*+?^${}()|[\]\\]/g;

export interface PathPattern {
  /** The profile's spelling, e.g. "/v1/models/{model...}". */
  source: string;
  regex: RegExp;
  names: string[];
}

/** Is this profile path a pattern (has a named segment)? */
export const isPattern = (path: string): boolean => path.includes('{');

export function compilePattern(source: string): PathPattern {
  const names: string[] = [];
  const parts = source.split('/').map((segment) => {
    const m = PARAM.exec(segment);
    if (!m) return segment.replace(ESCAPE, '\\$&');
    names.push(m[1]);
    // One segment (an encoded slash is no part of one); or the rest: segments joined by single
    // slashes, plain or encoded (`org%2Fmodel`), no empty one, no trailing slash.
    return m[2] ? '([^/]+(?:/[^/]+)*)' : '((?:[^/%]|%(?!2[fF]))+)';
  });
  return { source, regex: new RegExp(`^${parts.join('/')}$`), names };
}

/** The segments a pattern captured (raw, still percent-encoded), or undefined when it does not match. */
export function matchPattern(p: PathPattern, path: string): Record<string, string> | undefined {
  const m = p.regex.exec(path);
  if (!m) return undefined;
  const out: Record<string, string> = {};
  p.names.forEach((n, i) => (out[n] = m[i + 1]));
  return out;
}

/** A profile path list: exact paths and patterns. */
export class PathSet {
  private readonly exact: ReadonlySet<string>;
  private readonly patterns: readonly PathPattern[];

  constructor(paths: readonly string[]) {
    this.exact = new Set(paths.filter((p) => !isPattern(p)));
    this.patterns = paths.filter(isPattern).map(compilePattern);
  }

  has(path: string): boolean {
    return this.exact.has(path) || this.patterns.some((p) => p.regex.test(path));
  }
}
