// Which shape a family route's gateway errors take, per path (profile api.error_formats): an
// engine's native routes answer in its own shape, so its clients show the gateway's message; the
// route's default (the pipeline's error_format) elsewhere. Compiled once per family; looked up
// only when an error is rendered, never on a reply that succeeds.
import type { ErrorFormat } from './errors.js';
import { PathSet } from './path-patterns.js';

export class ErrorFormatPaths {
  private readonly sets: readonly (readonly [ErrorFormat, PathSet])[];

  constructor(byFormat: Readonly<Partial<Record<ErrorFormat, readonly string[]>>>) {
    this.sets = Object.entries(byFormat).map(([format, paths]) => [format as ErrorFormat, new PathSet(paths ?? [])] as const);
  }

  /** True when the profile names no path: the route keeps its default. */
  get empty(): boolean {
    return this.sets.length === 0;
  }

  /** The format for a request's path as it came (no query), on a route mounted at `prefix` (read
   *  from that path, not the stripped one: an error may come before match-prefix ran); undefined:
   *  the route's default. */
  formatOf(requestPath: string, prefix: string): ErrorFormat | undefined {
    const path = prefix && requestPath.startsWith(prefix) ? requestPath.slice(prefix.length) || '/' : requestPath;
    for (const [format, set] of this.sets) if (set.has(path)) return format;
    return undefined;
  }
}
