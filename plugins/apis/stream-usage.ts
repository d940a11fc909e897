// Asking a chat-completions stream for its usage (stream_options.include_usage) while tokens are
// counted and the engine can report it (the profile's request.stream_usage), when the client did
// not ask itself — and taking the extra event (`"choices": []` with the usage) out of the client's
// stream again, since a client that did not ask may not expect a chunk without choices.
import { modelKeys, topLevelValues, withModel, type Context, type Endpoint, type PipePlan } from '../../engine/api.js';

/** The body of this attempt's request, with the model routing chose (undefined: the body's),
 *  when it asks for the stream's usage on the client's behalf; null: it does not ask. Decided
 *  once per attempt (forward's request); the attempt's reply reads the answer with usageAsked. */
export function bodyAskingUsage(ctx: Context, ep: Endpoint, pathname: string, model: string | undefined): Buffer | null {
  if (!ctx.countsUsage || !ep.profile.request.stream_usage) return null;
  const rules = ep.profile.request.parsing_rules;
  if (pathname !== rules?.chat_completions_path && pathname !== rules?.completions_path) return null;
  const body = ctx.body;
  if (body === null) return null;
  // The top-level stream found without parsing the body: parsed only when it names
  // stream_options anywhere, to read them and add to them.
  const [stream] = topLevelValues(body, STREAM_KEY);
  if (stream === -1 || body[stream] !== T) return null;
  const options = body.indexOf(STREAM_OPTIONS_KEY) !== -1;
  const json = options ? (JSON.parse(withModel(body, model, ctx)!.toString()) as Record<string, unknown> & { stream_options?: object }) : null;
  if ((json?.stream_options as { include_usage?: unknown } | undefined)?.include_usage === true) return null;
  ctx.state[ASKED] = ep;
  if (json !== null) return Buffer.from(JSON.stringify({ ...json, stream_options: { ...json.stream_options, include_usage: true } }));
  // The option put in front of the body's own fields, stream among them (no parse).
  const sent = withModel(body, model, ctx)!;
  return Buffer.concat([ASK, sent.subarray(sent.indexOf(OPEN_BRACE) + 1)]);
}

const ASKED = 'stream-usage.asked';

/** Whether the request sent to `ep` asked for the usage on the client's behalf. */
export const usageAsked = (ctx: Context, ep: Endpoint | null): boolean => ctx.countsUsage && ep !== null && ctx.state[ASKED] === ep;

const T = 0x74;
const OPEN_BRACE = 0x7b;
const STREAM_OPTIONS_KEY = Buffer.from('"stream_options"');
const STREAM_KEY = modelKeys(['stream']);
const ASK = Buffer.from('{"stream_options":{"include_usage":true},');

const USAGE_KEY = Buffer.from('"usage"');
const EMPTY_CHOICES = /"choices"\s*:\s*\[\s*\]/;
const USAGE_OBJECT = /"usage"\s*:\s*\{/;
// The blank line that ends an SSE event: \n\n, or \r\n\r\n (found by its \n\r\n).
const LF_LF = Buffer.from('\n\n');
const LF_CRLF = Buffer.from('\n\r\n');

/** Where the event that holds `at` begins (after the blank line before it). */
function eventStart(b: Buffer, at: number): number {
  const lf = b.lastIndexOf(LF_LF, at);
  const crlf = b.lastIndexOf(LF_CRLF, at);
  return Math.max(lf === -1 ? 0 : lf + 2, crlf === -1 ? 0 : crlf + 3);
}

/** Where the event that holds `at` ends (after its blank line); its chunk's end without one. */
function eventEnd(b: Buffer, at: number): number {
  const lf = b.indexOf(LF_LF, at);
  const crlf = b.indexOf(LF_CRLF, at);
  if (lf === -1 && crlf === -1) return b.length;
  return lf !== -1 && (crlf === -1 || lf < crlf) ? lf + 2 : crlf + 3;
}

/** Whole events with the usage-only one left out (the relay hands a watched stream's events
 *  whole). Most chunks are looked at only for `"usage"` (a search of the bytes, no string made);
 *  an event that has a usage object is cut out when its choices are empty. */
function withoutUsageEvent(bytes: Buffer): Buffer {
  for (let at = bytes.lastIndexOf(USAGE_KEY); at !== -1; ) {
    const start = eventStart(bytes, at);
    const end = eventEnd(bytes, at);
    const event = bytes.toString('latin1', start, end);
    if (EMPTY_CHOICES.test(event) && USAGE_OBJECT.test(event)) {
      return end === bytes.length ? bytes.subarray(0, start) : Buffer.concat([bytes.subarray(0, start), bytes.subarray(end)]);
    }
    at = start === 0 ? -1 : bytes.lastIndexOf(USAGE_KEY, start - 1);
  }
  return bytes;
}

/** `plan` (a piped reply's) leaving out the usage event asked for. */
export function dropUsageEvent(plan: PipePlan): PipePlan {
  return { ...plan, filter: withoutUsageEvent };
}
