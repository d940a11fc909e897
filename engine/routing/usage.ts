// Tokens a request used, as its engines reported them: read by the relay from what it relays
// anyway (a stream's events that carry usage, the last bytes of a reply body), never by parsing a
// whole reply for it, and only while someone counts (keys on: Exchange.countsUsage). Each attempt
// whose reply reached the client counts (a broken stream and the continuation that finished it
// both ran on an engine); what an attempt's engine did not report is estimated and said so.
// What the fields are called in each API is the API's knowledge (UsageShape, from the terminal
// step's ApiShape), never this layer's.

/** Token counts. `input` is every prompt token, those served from the engine's prompt cache
 *  included (`cachedInput`); `output` every generated one, reasoning included (`reasoning`). */
export interface Usage {
  input: number;
  cachedInput: number;
  output: number;
  reasoning: number;
  /** Of input + output, how many were estimated (the engine did not report them). */
  estimated: number;
}

/** What one event or reply reported: the fields it named, and why the answer ended (its finish
 *  reason: stop, length, tool_calls… as the engine words it). */
export type Reported = Partial<Omit<Usage, 'estimated'>> & { finish?: string };

/** How an API's replies report usage (plugins/apis/usage-fields.ts for the inference APIs). */
export interface UsageShape {
  /** Whether an event parsed anyway (its JSON value) reports usage: it is read for it then.
   *  (After the stream's end, an event is read for its usage without being parsed.) */
  carries(value: unknown): boolean;
  /** The counts a stream event's data, or the end of a reply body, reports (its UTF-8 bytes),
   *  with a finish reason written there; null: none. */
  read(bytes: Buffer): Reported | null;
  /** The finish reason of a stream's terminator event, parsed anyway; undefined: none. */
  finish(value: unknown): string | undefined;
}

/** How much of a reply body's end is read for its usage (it comes last, or nearly). */
export const USAGE_TAIL_BYTES = 4096;

/** An estimate of the tokens in `bytes` of JSON text (about four bytes a token, envelope and all:
 *  errs on the high side). */
export const tokensIn = (bytes: number): number => Math.ceil(bytes / 4);

/** `more` merged into `into`: a later report of a field replaces an earlier one (the messages
 *  API reports output so far in each message_delta). */
export function mergeReported(into: Reported | null, more: Reported | null): Reported | null {
  if (more === null) return into;
  if (into === null) return { ...more };
  if (more.input !== undefined) into.input = more.input;
  if (more.cachedInput !== undefined) into.cachedInput = more.cachedInput;
  if (more.output !== undefined) into.output = more.output;
  if (more.reasoning !== undefined) into.reasoning = more.reasoning;
  if (more.finish !== undefined) into.finish = more.finish;
  return into;
}

/** One attempt's usage: what it reported, the rest estimated — input from the bytes it sent,
 *  output from the content events it streamed (about one token each), else the reply's bytes. */
export function attemptUsage(reported: Reported | null, sentBytes: number, events: number, replyBytes: number): Usage {
  const input = reported?.input;
  const output = reported?.output;
  const inputEstimate = input === undefined ? tokensIn(sentBytes) : 0;
  const outputEstimate = output === undefined ? (events > 0 ? events : tokensIn(replyBytes)) : 0;
  return {
    input: input ?? inputEstimate,
    cachedInput: reported?.cachedInput ?? 0,
    output: output ?? outputEstimate,
    reasoning: reported?.reasoning ?? 0,
    estimated: inputEstimate + outputEstimate,
  };
}

/** Nothing used: a failure status's count. */
export const noUsage = (): Usage => ({ input: 0, cachedInput: 0, output: 0, reasoning: 0, estimated: 0 });

/** `u` (a fresh count, which it may become) added to the request's total (null: nothing counted yet). */
export function addUsage(total: Usage | null, u: Usage): Usage {
  if (total === null) return u;
  total.input += u.input;
  total.cachedInput += u.cachedInput;
  total.output += u.output;
  total.reasoning += u.reasoning;
  total.estimated += u.estimated;
  return total;
}
