// Paths that could climb out of where the gateway sends them. A backend (or a proxy behind it)
// that normalises `/v1/../../etc/passwd` or decodes `..%2f` reaches files and routes nobody
// meant to expose, so such a request is refused before routing, on every route.

const DOT = /%2e/gi;
const SLASH = /%(2f|5c)|\\/i;

/** Why the path is refused (for the error message), or undefined when it is fine. */
export function unsafePath(pathname: string): string | undefined {
  // Most paths have none of these characters: one scan each and done.
  if (pathname.indexOf('.') < 0 && pathname.indexOf('%') < 0 && pathname.indexOf('\\') < 0) return undefined;
  if (SLASH.test(pathname)) return 'an encoded slash or a backslash';
  for (const raw of pathname.split('/')) {
    // Some servers read `..;x` as `..`: the matrix parameter does not hide the dots.
    const segment = raw.replace(DOT, '.').split(';', 1)[0];
    if (segment === '.' || segment === '..') return 'a dot segment (. or ..)';
  }
  return undefined;
}
