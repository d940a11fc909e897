// A request's conversation key (affinity.ts): the first session header present
// (proxy.affinity.session_headers: the gateway's own X-Gw-Session-Id, then those known clients
// send), else the body's prompt_cache_key (the OpenAI field Codex and opencode set to their
// session), else a hash of the conversation's opening — its system prompt and first user message,
// what an engine's prefix cache holds from the first turn on. Only the text counts: a client that
// moves cache_control or reorders fields between turns keeps its key. The model is part of the
// key, so one session's models are placed independently. Across the APIs:
//   chat completions, Ollama api/chat   messages: leading system/developer, first user
//   messages API                        system, first user message
//   Responses API                       instructions, input (text or its first user item)
//   completions, llama.cpp, api/generate  system (api/generate), the prompt's first 512 characters
//                                         (a bare prompt shorter than that gets a new key each turn:
//                                         its opening is not known; a session header keeps it)
import type { Context } from '../../engine/api.js';
import type { AffinityKey } from './affinity.js';

/** Each part of the opening counts up to this many characters: enough to tell conversations apart. */
const PART_LIMIT = 16_384;
/** A bare prompt grows with its conversation: only its beginning is the same on every turn. */
const PROMPT_OPENING = 512;

type Json = Record<string, unknown>;

/** The text of a content value: a string, or the text of its parts (text, input_text, and one
 *  level down, a tool result's content). Never deeper: a hostile body nests without end. */
function textOf(content: unknown, depth = 0): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  let text = '';
  for (const part of content) {
    if (typeof part === 'string') text += part;
    else if (part && typeof part === 'object') {
      const p = part as Json;
      if (typeof p.text === 'string') text += p.text;
      else if (depth === 0 && p.content !== undefined) text += textOf(p.content, 1);
    }
    if (text.length > PART_LIMIT) break;
  }
  return text;
}

/** System prompt and first user message of a body, or undefined when it has neither. */
export function openingOf(body: unknown): [string, string] | undefined {
  if (!body || typeof body !== 'object' || Array.isArray(body)) return undefined;
  const b = body as Json;
  let system = textOf(b.system) || textOf(b.instructions);
  let user = '';
  const turns = Array.isArray(b.messages) ? b.messages : Array.isArray(b.input) ? b.input : null;
  if (turns) {
    for (const m of turns) {
      if (!m || typeof m !== 'object') continue;
      const { role, content } = m as Json;
      if (role === 'system' || role === 'developer') system += textOf(content);
      else if (role === 'user') {
        user = textOf(content);
        break;
      }
    }
  } else if (typeof b.input === 'string') user = b.input;
  else if (typeof b.prompt === 'string') user = b.prompt.slice(0, PROMPT_OPENING);
  else if (Array.isArray(b.prompt) && typeof b.prompt[0] === 'string') user = b.prompt[0].slice(0, PROMPT_OPENING);
  if (!system && !user) return undefined;
  return [system.slice(0, PART_LIMIT), user.slice(0, PART_LIMIT)];
}

/** 64 bits of hash over the parts (two 32-bit lanes of multiply-xor mixing, the scheme of
 *  cyrb53): a key, not a secret, and the texts are mostly short, where crypto's setup costs more
 *  than the hashing. A 0 between parts keeps ("ab", "c") apart from ("a", "bc"). */
function keyOf(parts: readonly string[], source: string, body: Buffer | null): AffinityKey {
  let h1 = 0xdeadbeef;
  let h2 = 0x41c6ce57;
  for (const p of parts) {
    for (let i = 0; i <= p.length; i++) {
      const c = i < p.length ? p.charCodeAt(i) : 0;
      h1 = Math.imul(h1 ^ c, 2654435761);
      h2 = Math.imul(h2 ^ c, 1597334677);
    }
  }
  h1 = Math.imul(h1 ^ (h1 >>> 16), 2246822507) ^ Math.imul(h2 ^ (h2 >>> 13), 3266489909);
  h2 = Math.imul(h2 ^ (h2 >>> 16), 2246822507) ^ Math.imul(h1 ^ (h1 >>> 13), 3266489909);
  const hi = h1 >>> 0;
  const lo = h2 >>> 0;
  return { hi, lo, id: hi * 2 ** 21 + (lo >>> 11), source, body, home: null, hashed: null, stored: null, overloaded: false, leastLoaded: false };
}

/** Makes a request's key: `headers` are lower-case names, the first listed present wins. Read
 *  from the raw headers: asking Node for `req.headers` builds the whole object, which the proxy
 *  path otherwise never does. */
export function affinityKeys(headers: readonly string[]) {
  const lengths = new Set(headers.map((h) => h.length));
  const session = (raw: readonly string[]): [string, string] | undefined => {
    let best = headers.length;
    let value = '';
    for (let i = 0; i + 1 < raw.length; i += 2) {
      if (!lengths.has(raw[i].length)) continue;
      const k = headers.indexOf(raw[i].toLowerCase());
      if (k >= 0 && k < best && raw[i + 1]) [best, value] = [k, raw[i + 1]];
    }
    return best < headers.length ? [headers[best], value] : undefined;
  };
  return (ctx: Context, model: string): AffinityKey | null => {
    const found = session(ctx.req.rawHeaders);
    if (found) return keyOf([model, found[1]], found[0], ctx.body);
    const body = ctx.bodyJson();
    const cacheKey = (body as { prompt_cache_key?: unknown } | null)?.prompt_cache_key;
    if (typeof cacheKey === 'string' && cacheKey) return keyOf([model, cacheKey], 'prompt_cache_key', ctx.body);
    const opening = openingOf(body);
    return opening ? keyOf([model, ...opening], 'conversation', ctx.body) : null;
  };
}
