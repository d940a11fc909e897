// How deep a JSON text nests arrays and objects, found without parsing it: code that walks
// parsed JSON recursively (checks, estimates, JSON.stringify) overflows the stack on a body
// nested some thousands of levels deep, so such a body is refused before anything walks it.

const QUOTE = 0x22,
  BACKSLASH = 0x5c,
  OPEN_ARRAY = 0x5b,
  CLOSE_ARRAY = 0x5d,
  OPEN_OBJECT = 0x7b,
  CLOSE_OBJECT = 0x7d;

/** Does `json` nest arrays and objects more than `max` levels deep? Brackets inside strings do
 *  not count; strings are skipped with the native indexOf, so the loop only visits the bytes
 *  between them. A text that is not JSON gives some answer; the parser judges it. */
export function nestsDeeperThan(json: Buffer, max: number): boolean {
  let depth = 0;
  for (let i = 0; i < json.length; i++) {
    const c = json[i];
    if (c === QUOTE) {
      // The closing quote: the next one not escaped (preceded by an even run of backslashes).
      let end = i;
      for (;;) {
        end = json.indexOf(QUOTE, end + 1);
        if (end < 0) return false;
        let slashes = 0;
        while (json[end - 1 - slashes] === BACKSLASH) slashes++;
        if (slashes % 2 === 0) break;
      }
      i = end;
    } else if (c === OPEN_ARRAY || c === OPEN_OBJECT) {
      if (++depth > max) return true;
    } else if (c === CLOSE_ARRAY || c === CLOSE_OBJECT) depth--;
  }
  return false;
}
