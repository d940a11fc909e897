// Where the inference APIs report the tokens a request used, for the relay's count
// (engine/routing/usage.ts): OpenAI-style `usage` (chat completions, completions, vLLM, SGLang,
// llama.cpp: prompt_tokens, completion_tokens, their details' cached_tokens and reasoning_tokens),
// the messages API's and the Responses API's (input_tokens, output_tokens; the messages API's
// cache_read_input_tokens and cache_creation_input_tokens beside its input_tokens), Ollama's
// prompt_eval_count and eval_count, llama.cpp's native tokens_evaluated and tokens_predicted and
// its `timings` (prompt_n, predicted_n, cache_n). Read from JSON text by field name: a name inside
// a string is escaped (\"prompt_tokens\") and never matches, so a prompt cannot fake a count.
import type { Reported, UsageShape } from '../../engine/api.js';

const FIELD =
  /"(prompt_tokens|completion_tokens|input_tokens|output_tokens|cached_tokens|reasoning_tokens|cache_read_input_tokens|cache_creation_input_tokens|prompt_eval_count|eval_count|tokens_evaluated|tokens_predicted|prompt_n|predicted_n|cache_n)"\s*:\s*(\d+)/g;

function read(text: string): Reported | null {
  let f: Record<string, number> | null = null;
  FIELD.lastIndex = 0;
  for (let m = FIELD.exec(text); m !== null; m = FIELD.exec(text)) (f ??= {})[m[1]] = Number(m[2]);
  if (f === null) return null;
  const r: Reported = {};
  // The messages API counts cache reads and writes apart from input_tokens; the others include them.
  const input =
    f.prompt_tokens ??
    (f.input_tokens === undefined ? undefined : f.input_tokens + (f.cache_read_input_tokens ?? 0) + (f.cache_creation_input_tokens ?? 0)) ??
    f.prompt_eval_count ??
    f.tokens_evaluated ??
    (f.prompt_n === undefined ? undefined : f.prompt_n + (f.cache_n ?? 0));
  const output = f.completion_tokens ?? f.output_tokens ?? f.eval_count ?? f.tokens_predicted ?? f.predicted_n;
  const cached = f.cached_tokens ?? f.cache_read_input_tokens ?? f.cache_n;
  if (input !== undefined) r.input = input;
  if (output !== undefined) r.output = output;
  if (cached !== undefined) r.cachedInput = cached;
  if (f.reasoning_tokens !== undefined) r.reasoning = f.reasoning_tokens;
  return r.input === undefined && r.output === undefined ? null : r;
}

export const INFERENCE_USAGE: UsageShape = {
  mayCarry: /(?:_tokens|eval_count|evaluated|predicted|_n)"\s*:\s*\d/,
  read,
};
