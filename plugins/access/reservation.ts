// A request's token reservation, between the step that makes it (token-limit) and the one that
// settles it when the request is over (usage); and what a request asks for at most.

/** ctx.state: the request's reservation in the usage ledger (0 or absent: none). */
export const RESERVED = 'usage.reserved';

/** Where the inference APIs put a request's output cap (top level, or Ollama's options). */
const CAPS = ['max_tokens', 'max_completion_tokens', 'max_output_tokens', 'n_predict'] as const;

/** The output a request asks for at most, if it says. */
export function outputCap(body: unknown): number | undefined {
  if (typeof body !== 'object' || body === null) return undefined;
  const b = body as Record<string, unknown>;
  for (const f of CAPS) if (typeof b[f] === 'number' && (b[f] as number) > 0) return b[f] as number;
  const n = (b.options as Record<string, unknown> | undefined)?.num_predict;
  return typeof n === 'number' && n > 0 ? n : undefined;
}
