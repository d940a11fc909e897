// Find the top-level "model" string of a JSON object body without parsing the whole body:
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

const KEY = Buffer.from('"model"');

export function findModelField(buf: Buffer): ModelField | null {
  let i = 0;
  while (i < buf.length && isSpace(buf[i])) i++;
  if (buf[i] !== OPEN_OBJ) return null;
  let depth = 0;
  for (; i < buf.length; i++) {
    const c = buf[i];
    if (c === QUOTE) {
      const end = skipString(buf, i);
      if (end < 0) return null;
      if (depth === 1 && end - i === KEY.length && buf.compare(KEY, 0, KEY.length, i, end) === 0) {
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
      i = end - 1;
    } else if (c === OPEN_OBJ || c === OPEN_ARR) depth++;
    else if (c === CLOSE_OBJ || c === CLOSE_ARR) {
      if (--depth === 0) return null;
    }
  }
  return null;
}

/** The body with the model value replaced; every other byte kept. */
export function replaceModel(buf: Buffer, field: ModelField, model: string): Buffer {
  return Buffer.concat([buf.subarray(0, field.start), Buffer.from(JSON.stringify(model)), buf.subarray(field.end)]);
}
