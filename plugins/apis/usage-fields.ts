// Where the inference APIs report the tokens a request used, for the relay's count
// (engine/routing/usage.ts): OpenAI-style `usage` (chat completions, completions, vLLM, SGLang,
// llama.cpp: prompt_tokens, completion_tokens, their details' cached_tokens and reasoning_tokens),
// the messages API's and the Responses API's (input_tokens, output_tokens; the messages API's
// cache_read_input_tokens and cache_creation_input_tokens beside its input_tokens), Ollama's
// prompt_eval_count and eval_count, llama.cpp's native tokens_evaluated and tokens_predicted and
// its `timings` (prompt_n, predicted_n, cache_n). Read from JSON text by field name: a name inside
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
const SLOT = new Map<string, number>(NAMES.map((n, i) => [n, i]));
const SHORTEST = Math.min(...NAMES.map((n) => n.length));
const LONGEST = Math.max(...NAMES.map((n) => n.length));

/** Where the counts begin: the usage object, llama.cpp's timings, or the first count of the
 *  engines that put them at the top level; -1: nowhere. Each is a key (in a string it would be
 *  escaped), so the scan starts in step with the JSON's strings. */
const START = /"(?:usage|timings|prompt_eval_count|eval_count|tokens_evaluated|tokens_predicted)"/;
const startOf = (text: string): number => text.search(START);

const BACKSLASH = 0x5c;
const COLON = 0x3a;
const isBlank = (c: number) => c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d;

/** The end of the JSON string that opens at `open` (its closing quote), escapes skipped; -1: none. */
function closing(text: string, open: number): number {
  for (let q = text.indexOf('"', open + 1); q !== -1; q = text.indexOf('"', q + 1)) {
    let slashes = 0;
    for (let k = q - 1; k > open && text.charCodeAt(k) === BACKSLASH; k--) slashes++;
    if (slashes % 2 === 0) return q;
  }
  return -1;
}

/** Each count field's number, from `start` (a key's opening quote) on: one pass over the text,
 *  strings skipped whole, a key looked up only when a number follows it. */
function fieldsOf(text: string, start: number): (number | undefined)[] | null {
  let found: (number | undefined)[] | null = null;
  const n = text.length;
  for (let open = start; open !== -1 && open < n; ) {
    const end = closing(text, open);
    if (end === -1) break;
    const len = end - open - 1;
    let j = end + 1;
    if (len >= SHORTEST && len <= LONGEST) {
      while (j < n && isBlank(text.charCodeAt(j))) j++;
      if (text.charCodeAt(j) === COLON) {
        j++;
        while (j < n && isBlank(text.charCodeAt(j))) j++;
        let c = text.charCodeAt(j);
        if (c >= 0x30 && c <= 0x39) {
          const slot = SLOT.get(text.slice(open + 1, end));
          if (slot !== undefined) {
            let v = 0;
            for (; c >= 0x30 && c <= 0x39; c = text.charCodeAt(++j)) v = v * 10 + c - 0x30;
            (found ??= [])[slot] = v;
          }
        }
      }
    }
    open = text.indexOf('"', j);
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

function read(text: string): Reported | null {
  const start = startOf(text);
  const f = start === -1 ? null : fieldsOf(text, start);
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
  return r.input === undefined && r.output === undefined ? null : r;
}

export const INFERENCE_USAGE: UsageShape = {
  mayCarry: /(?:_tokens|eval_count|evaluated|predicted|_n)"\s*:\s*\d/,
  read,
};
