// Paths that could climb out of where the gateway sends them. A backend (or a proxy behind it)
// that normalises `/v1/../../etc/passwd` or decodes `..%2f` reaches files and routes nobody
// meant to expose, so such a request is refused before routing, on every route.
// One exception: an encoded slash inside a model id, after the path's last `/models/` segment.
// Model ids hold slashes (`Qwen/Qwen2.5-7B`) and the openai package sends
// `models.retrieve('Qwen/Qwen2.5-7B')` as `/v1/models/Qwen%2FQwen2.5-7B`. Dot segments are looked
// for on both sides of an encoded slash.

const DOT = /%2e/gi;
const SEGMENTS = /\/|%2f/i;
const BACKSLASH = /%5c|\\/i;
const ENCODED_SLASH = /%2f/i;
const MODEL_ID = '/models/';

/** Why the path is refused (for the error message), or undefined when it is fine. */
export function unsafePath(pathname: string): string | undefined {
  // Most paths have none of these characters: one scan each and done.
  if (pathname.indexOf('.') < 0 && pathname.indexOf('%') < 0 && pathname.indexOf('\\') < 0) return undefined;
  if (BACKSLASH.test(pathname)) return 'a backslash, plain or encoded';
  const id = pathname.lastIndexOf(MODEL_ID);
  if (ENCODED_SLASH.test(id < 0 ? pathname : pathname.slice(0, id + MODEL_ID.length))) return 'an encoded slash outside a model id';
  for (const raw of pathname.split(SEGMENTS)) {
    // Some servers read `..;x` as `..`: the matrix parameter does not hide the dots.
    const segment = raw.replace(DOT, '.').split(';', 1)[0];
    if (segment === '.' || segment === '..') return 'a dot segment (. or ..)';
  }
  return undefined;
}
