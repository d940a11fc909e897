// Asking a chat-completions stream for its usage (stream_options.include_usage) while tokens are
// counted and the engine can report it (the profile's request.stream_usage), when the client did
// not ask itself — and taking the extra event (`"choices": []` with the usage) out of the client's
// stream again, since a client that did not ask may not expect a chunk without choices.
import { withModel, type Context, type Endpoint, type PipePlan } from '../../engine/api.js';

/** Should this attempt's request ask for the stream's usage on the client's behalf? */
export function asksUsage(ctx: Context, ep: Endpoint, pathname: string): boolean {
  if (!ctx.countsUsage || !ep.profile.request.stream_usage) return false;
  const rules = ep.profile.request.parsing_rules;
  if (pathname !== rules?.chat_completions_path && pathname !== rules?.completions_path) return false;
  // Only a body that asks for a stream is parsed for it.
  if (!asksStream(ctx.body)) return false;
  const body = ctx.bodyJson() as { stream?: unknown; stream_options?: { include_usage?: unknown } } | undefined;
  return body?.stream === true && body.stream_options?.include_usage !== true;
}

const COLON = 0x3a;
const T = 0x74;
const isBlank = (c: number) => c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d;

/** Whether a JSON body has `"stream": true` (the key's first appearance; one search of its bytes). */
function asksStream(body: Buffer | null): boolean {
  if (body === null) return false;
  let i = body.indexOf('"stream"');
  if (i === -1) return false;
  for (i += 8; isBlank(body[i]); i++);
  if (body[i++] !== COLON) return false;
  while (isBlank(body[i])) i++;
  return body[i] === T;
}

const ASK = Buffer.from('{"stream_options":{"include_usage":true},');
const OPEN_BRACE = 0x7b;

/** The body asking for the usage, with the model routing chose (undefined: the body's): the
 *  option put in front of the body's own fields (no parse) when it has no stream_options, else
 *  added to them. */
export function withUsageAsked(ctx: Context, model: string | undefined): Buffer {
  const body = withModel(ctx.body, model, ctx)!;
  let i = 0;
  while (isBlank(body[i])) i++;
  if (body[i] === OPEN_BRACE && body.indexOf('"stream_options"') === -1) {
    let j = i + 1;
    while (isBlank(body[j])) j++;
    // {} has no field to put a comma before.
    return body[j] === 0x7d ? Buffer.from('{"stream_options":{"include_usage":true}}') : Buffer.concat([ASK, body.subarray(i + 1)]);
  }
  const json = JSON.parse(body.toString()) as Record<string, unknown> & { stream_options?: object };
  return Buffer.from(JSON.stringify({ ...json, stream_options: { ...json.stream_options, include_usage: true } }));
}

const EMPTY_CHOICES = /"choices"\s*:\s*\[\s*\]/;
const USAGE = /"usage"\s*:\s*\{/;

/** Whole events with the usage-only one left out (the relay hands a watched stream's events whole).
 *  Most chunks are looked at only for `"usage"` (a search of the bytes, no string made). */
function withoutUsageEvent(bytes: Buffer): Buffer {
  if (bytes.indexOf('"usage"') === -1) return bytes;
  const text = bytes.toString('latin1');
  if (!EMPTY_CHOICES.test(text)) return bytes;
  const kept = text.split(/(?<=\n\n|\r\n\r\n)/).filter((event) => !(EMPTY_CHOICES.test(event) && USAGE.test(event)));
  return Buffer.from(kept.join(''), 'latin1');
}

/** `plan` (a piped reply's) leaving out the usage event asked for. */
export function dropUsageEvent(plan: PipePlan): PipePlan {
  return { ...plan, filter: withoutUsageEvent };
}
