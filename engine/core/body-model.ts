// Find the top-level model string of a JSON object body (the `model` field, or the profile's
// request.model_field_paths in their order) without parsing the whole body:
// strings are skipped with native byte search (UTF-8 multi-byte sequences never contain the
// structural bytes), so a 200 KB chat body costs little, and the byte span lets a rewrite keep
// every other byte and the key order.
const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_OBJ = 0x7b;
const CLOSE_OBJ = 0x7d;
const OPEN_ARR = 0x5b;
const CLOSE_ARR = 0x5d;
const COLON = 0x3a;

export interface ModelField {
  value: string;
  /** Byte offsets of the value token, quotes included. */
  start: number;
  end: number;
}

/** Index just past the string that starts at `i` (a quote), or -1 when it never ends. */
function skipString(buf: Buffer, i: number): number {
  let j = i + 1;
  for (;;) {
    j = buf.indexOf(QUOTE, j);
    if (j < 0) return -1;
    let backslashes = 0;
    for (let k = j - 1; buf[k] === BACKSLASH; k--) backslashes++;
    if (backslashes % 2 === 0) return j + 1;
    j++;
  }
}

function isSpace(c: number): boolean {
  return c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;
}

/** The quoted key names to look for, compiled once per profile (request.model_field_paths). */
export function modelKeys(fields: readonly string[]): readonly Buffer[] {
  return fields.map((f) => Buffer.from(JSON.stringify(f)));
}

export const DEFAULT_MODEL_KEYS = modelKeys(['model']);

/** The string value of the first of `keys` (in their order) present at the top level, or null. */
export function findModelField(buf: Buffer, keys: readonly Buffer[] = DEFAULT_MODEL_KEYS): ModelField | null {
  let i = 0;
  while (i < buf.length && isSpace(buf[i])) i++;
  if (buf[i] !== OPEN_OBJ) return null;
  let depth = 0;
  let best: ModelField | null = null;
  let bestRank = keys.length;
  for (; i < buf.length; i++) {
    const c = buf[i];
    if (c === QUOTE) {
      const end = skipString(buf, i);
      if (end < 0) return best;
      const rank = depth === 1 ? keyRank(buf, i, end, keys, bestRank) : -1;
      if (rank >= 0) {
        const field = valueAfter(buf, end);
        if (field) {
          if (rank === 0) return field;
          best = field;
          bestRank = rank;
        }
      }
      i = end - 1;
    } else if (c === OPEN_OBJ || c === OPEN_ARR) depth++;
    else if (c === CLOSE_OBJ || c === CLOSE_ARR) {
      if (--depth === 0) return best;
    }
  }
  return best;
}

/** Which of the keys (before `below`) the string token [start, end) is, or -1. */
function keyRank(buf: Buffer, start: number, end: number, keys: readonly Buffer[], below: number): number {
  for (let k = 0; k < below; k++) {
    const key = keys[k];
    if (end - start === key.length && buf.compare(key, 0, key.length, start, end) === 0) return k;
  }
  return -1;
}

/** The string value after a key ending at `end` (a colon, then a string), or null when it is not a string. */
function valueAfter(buf: Buffer, end: number): ModelField | null {
  let v = end;
  while (v < buf.length && isSpace(buf[v])) v++;
  if (buf[v] !== COLON) return null;
  v++;
  while (v < buf.length && isSpace(buf[v])) v++;
  if (buf[v] !== QUOTE) return null;
  const vEnd = skipString(buf, v);
  if (vEnd < 0) return null;
  try {
    return { value: JSON.parse(buf.toString('utf8', v, vEnd)), start: v, end: vEnd };
  } catch {
    return null;
  }
}

/** The body with the model value replaced; every other byte kept. */
export function replaceModel(buf: Buffer, field: ModelField, model: string): Buffer {
  return Buffer.concat([buf.subarray(0, field.start), Buffer.from(JSON.stringify(model)), buf.subarray(field.end)]);
}

/** `body` as sent to an endpoint routing chose `model` for (an alias's real name, a fallback
 *  model): its top-level model value replaced, every other byte and the key order kept; the body
 *  itself when `model` is undefined, the body has no model string, or it names `model` already.
 *  `request`: the client's request, whose own body's model field is found already (by the route's
 *  model keys); a body a step built is searched for `model`. */
export function withModel(
  body: Buffer | null,
  model: string | undefined,
  request?: { readonly body: Buffer | null; modelSpan(): ModelField | null },
): Buffer | null {
  if (!model || !body) return body;
  const field = request && body === request.body ? request.modelSpan() : findModelField(body);
  return !field || field.value === model ? body : replaceModel(body, field, model);
}

/** Where the value of each of `keys` (quoted, as modelKeys makes them) starts at the top level of
 *  a JSON object body, in their order; -1 for a key it does not have. One pass (to the last of
 *  them), no parse. */
export function topLevelValues(buf: Buffer, keys: readonly Buffer[]): number[] {
  const at = keys.map(() => -1);
  let left = keys.length;
  let i = 0;
  while (i < buf.length && isSpace(buf[i])) i++;
  if (buf[i] !== OPEN_OBJ) return at;
  let depth = 0;
  for (; i < buf.length; i++) {
    const c = buf[i];
    if (c === QUOTE) {
      const end = skipString(buf, i);
      if (end < 0) return at;
      const k = depth === 1 ? keyRank(buf, i, end, keys, keys.length) : -1;
      if (k >= 0 && at[k] === -1) {
        let v = end;
        while (v < buf.length && isSpace(buf[v])) v++;
        if (buf[v] === COLON) {
          v++;
          while (v < buf.length && isSpace(buf[v])) v++;
          at[k] = v;
          if (--left === 0) return at;
        }
      }
      i = end - 1;
    } else if (c === OPEN_OBJ || c === OPEN_ARR) depth++;
    else if ((c === CLOSE_OBJ || c === CLOSE_ARR) && --depth === 0) return at;
  }
  return at;
}
