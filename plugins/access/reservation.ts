// A request's token reservation, between the step that makes it (token-limit) and the one that
// settles it when the request is over (usage); and what a request asks for at most.

/** ctx.state: the request's reservation in the usage ledger (0 or absent: none). */
export const RESERVED = 'usage.reserved';

/** Where the inference APIs put a request's output cap (top level, or Ollama's options), as the
 *  quoted keys searched for (Buffers: a string would be encoded again at every search). */
const CAPS = ['max_tokens', 'max_completion_tokens', 'max_output_tokens', 'num_predict', 'n_predict'].map((f) => Buffer.from(`"${f}"`));

const COLON = 0x3a;
const isBlank = (c: number) => c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d;

/** The output a JSON request body asks for at most, if it says: the first of its cap fields
 *  (max_tokens…, Ollama's options.num_predict) with a number, found in the bytes without parsing
 *  the body. A field name inside a string is escaped (\"max_tokens\") and never matches. */
export function outputCap(body: Buffer | null): number | undefined {
  if (body === null) return undefined;
  for (const key of CAPS) {
    for (let at = body.indexOf(key); at !== -1; at = body.indexOf(key, at + 1)) {
      let i = at + key.length;
      while (i < body.length && isBlank(body[i])) i++;
      if (body[i++] !== COLON) continue;
      while (i < body.length && isBlank(body[i])) i++;
      let n = 0;
      let digits = 0;
      for (; i < body.length && body[i] >= 0x30 && body[i] <= 0x39 && digits < 12; i++, digits++) n = n * 10 + body[i] - 0x30;
      if (digits > 0 && n > 0) return n;
    }
  }
  return undefined;
}
