// Where the inference APIs report the tokens a request used, for the relay's count
// (engine/routing/usage.ts): OpenAI-style `usage` (chat completions, completions, vLLM, SGLang,
// llama.cpp: prompt_tokens, completion_tokens, their details' cached_tokens and reasoning_tokens),
// the messages API's and the Responses API's (input_tokens, output_tokens; the messages API's
// cache_read_input_tokens and cache_creation_input_tokens beside its input_tokens), Ollama's
// prompt_eval_count and eval_count, llama.cpp's native tokens_evaluated and tokens_predicted and
// its `timings` (prompt_n, predicted_n, cache_n). Read from JSON bytes by field name: a name inside
// a string is escaped (\"prompt_tokens\") and never matches, so a prompt cannot fake a count.
import type { Reported, UsageShape } from '../../engine/api.js';

/** The fields read, each to its slot. */
const NAMES = [
  'prompt_tokens',
  'completion_tokens',
  'input_tokens',
  'output_tokens',
  'cached_tokens',
  'reasoning_tokens',
  'cache_read_input_tokens',
  'cache_creation_input_tokens',
  'prompt_eval_count',
  'eval_count',
  'tokens_evaluated',
  'tokens_predicted',
  'prompt_n',
  'predicted_n',
  'cache_n',
] as const;
/** The names by length, as bytes, each with its slot: a key is matched in place. */
const BY_LENGTH: { name: Buffer; slot: number }[][] = [];
NAMES.forEach((name, slot) => (BY_LENGTH[name.length] ??= []).push({ name: Buffer.from(name), slot }));

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COLON = 0x3a;
const isBlank = (c: number) => c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d;
const isDigit = (c: number) => c >= 0x30 && c <= 0x39;

// Read from the bytes, not a string made of them: a byte is read for a few instructions, where
// V8 checks a string's representation at every character.

const USAGE = Buffer.from('"usage"');
/** The keys of the engines without a usage object: llama.cpp's timings, and the counts of
 *  those that put them at the top level. */
/** How far from the end a usage object is looked for byte by byte. */
const NEAR_END = 256;
const OTHER_STARTS = ['"timings"', '"prompt_eval_count"', '"eval_count"', '"tokens_evaluated"', '"tokens_predicted"'].map((k) => Buffer.from(k));

/** Where the counts begin: the last usage object (looked for from the end, where replies put it),
 *  else the first of the other keys; -1: nowhere. Each is a key (in a string it would be escaped:
 *  \"usage\"), so the scan starts in step with the JSON's strings. */
function startOf(b: Buffer): number {
  // The last bytes by hand (the usual place: cheaper than a call), the rest by lastIndexOf.
  const near = Math.max(0, b.length - NEAR_END);
  for (let i = b.length - USAGE.length; i >= near; i--) if (b[i] === QUOTE && matches(b, i, USAGE)) return i;
  const usage = near === 0 ? -1 : b.lastIndexOf(USAGE, near - 1);
  if (usage !== -1) return usage;
  let first = -1;
  for (const key of OTHER_STARTS) {
    const at = b.indexOf(key);
    if (at !== -1 && (first === -1 || at < first)) first = at;
  }
  return first;
}

/** Whether b holds `name` at `from`. */
function matches(b: Buffer, from: number, name: Buffer): boolean {
  for (let k = 0; k < name.length; k++) if (b[from + k] !== name[k]) return false;
  return true;
}

/** The slot of the name at `from` among those of its length, or -1. */
function slotAt(b: Buffer, from: number, names: readonly { name: Buffer; slot: number }[]): number {
  for (const { name, slot } of names) if (matches(b, from, name)) return slot;
  return -1;
}

/** The end of the JSON string that opens at `open` (its closing quote), escapes skipped; -1: none. */
function closing(b: Buffer, open: number): number {
  for (let i = open + 1; i < b.length; i++) {
    const c = b[i];
    if (c === QUOTE) return i;
    if (c === BACKSLASH) i++;
  }
  return -1;
}

/** Each count field's number, from `start` (a key's opening quote) on: one pass over the bytes,
 *  strings skipped whole, a key looked up only when a number follows it. */
function fieldsOf(b: Buffer, start: number): (number | undefined)[] | null {
  let found: (number | undefined)[] | null = null;
  const n = b.length;
  for (let open = start; open < n; ) {
    const end = closing(b, open);
    if (end === -1) break;
    const names = BY_LENGTH[end - open - 1];
    let j = end + 1;
    if (names !== undefined) {
      while (j < n && isBlank(b[j])) j++;
      if (b[j] === COLON) {
        j++;
        while (j < n && isBlank(b[j])) j++;
        if (isDigit(b[j])) {
          const slot = slotAt(b, open + 1, names);
          if (slot !== -1) {
            let v = 0;
            for (; isDigit(b[j]); j++) v = v * 10 + b[j] - 0x30;
            (found ??= [])[slot] = v;
          }
        }
      }
    }
    while (j < n && b[j] !== QUOTE) j++;
    open = j;
  }
  return found;
}

// The slots of NAMES, in its order.
const [
  PROMPT,
  COMPLETION,
  INPUT,
  OUTPUT,
  CACHED,
  REASONING,
  CACHE_READ,
  CACHE_CREATION,
  PROMPT_EVAL,
  EVAL,
  EVALUATED,
  PREDICTED,
  PROMPT_N,
  PREDICTED_N,
  CACHE_N,
] = NAMES.map((_, i) => i);

function read(bytes: Buffer): Reported | null {
  const start = startOf(bytes);
  const f = start === -1 ? null : fieldsOf(bytes, start);
  if (f === null) return null;
  const r: Reported = {};
  // The messages API counts cache reads and writes apart from input_tokens; the others include them.
  const input =
    f[PROMPT] ??
    (f[INPUT] === undefined ? undefined : f[INPUT] + (f[CACHE_READ] ?? 0) + (f[CACHE_CREATION] ?? 0)) ??
    f[PROMPT_EVAL] ??
    f[EVALUATED] ??
    (f[PROMPT_N] === undefined ? undefined : f[PROMPT_N] + (f[CACHE_N] ?? 0));
  const output = f[COMPLETION] ?? f[OUTPUT] ?? f[EVAL] ?? f[PREDICTED] ?? f[PREDICTED_N];
  const cached = f[CACHED] ?? f[CACHE_READ] ?? f[CACHE_N];
  if (input !== undefined) r.input = input;
  if (output !== undefined) r.output = output;
  if (cached !== undefined) r.cachedInput = cached;
  if (f[REASONING] !== undefined) r.reasoning = f[REASONING];
  const finish = finishIn(bytes);
  if (finish !== undefined) r.finish = finish;
  return r.input === undefined && r.output === undefined ? null : r;
}

/** The keys a finish reason is written under: chat completions', the messages API's, Ollama's. */
const FINISH_KEYS = ['"finish_reason"', '"stop_reason"', '"done_reason"'].map((k) => Buffer.from(k));
/** A finish reason is a short word: more is not one. */
const FINISH_MAX = 64;

/** The last finish reason written in these bytes as a string (null ones skipped), by its key. */
function finishIn(b: Buffer): string | undefined {
  for (const key of FINISH_KEYS) {
    const at = b.lastIndexOf(key);
    if (at === -1) continue;
    let j = at + key.length;
    while (j < b.length && isBlank(b[j])) j++;
    if (b[j] !== COLON) continue;
    j++;
    while (j < b.length && isBlank(b[j])) j++;
    if (b[j] !== QUOTE) continue;
    const end = b.indexOf(QUOTE, j + 1);
    if (end !== -1 && end - j - 1 <= FINISH_MAX) return b.toString('latin1', j + 1, end);
  }
  return undefined;
}

/** A stream's terminator event: chat completions' and completions' choices[].finish_reason. */
function finish(value: unknown): string | undefined {
  if (!isObject(value) || !Array.isArray(value.choices)) return undefined;
  for (const c of value.choices) if (isObject(c) && typeof c.finish_reason === 'string' && c.finish_reason) return c.finish_reason;
  return undefined;
}

const isObject = (u: unknown): u is Record<string, unknown> => typeof u === 'object' && u !== null;

/** Whether a parsed event reports usage: a usage object (OpenAI-style; the messages API's, also
 *  inside message_start's message; the Responses API's inside its response), llama.cpp's timings,
 *  or the counts Ollama and llama.cpp's native API put at the top level. */
function carries(value: unknown): boolean {
  if (!isObject(value)) return false;
  return (
    isObject(value.usage) ||
    isObject(value.timings) ||
    typeof value.eval_count === 'number' ||
    typeof value.tokens_predicted === 'number' ||
    (isObject(value.message) && isObject(value.message.usage)) ||
    (isObject(value.response) && isObject(value.response.usage))
  );
}

export const INFERENCE_USAGE: UsageShape = { carries, read, finish };
