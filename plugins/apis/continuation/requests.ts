// The request that asks an engine to continue an answer: the original body with the answer so
// far added the way the route's API takes it (profile api.continuation says which API a route
// speaks, and what fields the engine needs):
// - chat: a trailing assistant message (the client's own prefill, if it sent one, extended),
//   plus the engine's chat_fields (vLLM: continue_final_message, add_generation_prompt: false);
// - messages: the same, the API's own prefill;
// - completions, llama_completion and raw ollama_generate: the prompt followed by the text;
// - ollama_chat: a trailing assistant message; a templated ollama_generate goes to api/chat.
// The token limit is reduced by what was generated (reported, else a lower bound).
import type { ContinuationKind, Profile } from '../../../engine/api.js';
import type { AnswerText } from './answer.js';

/** The continuation body, and the path when it differs from the original's; or why not. */
export type Continued = { body: Record<string, unknown>; path?: string } | string;

/** Extend the body's trailing assistant message (the client's own prefill: an engine that
 *  repeats it has it in the answer already), or add one. The answer learns what was sent: an
 *  engine may repeat all of it. */
function withAssistant(messages: unknown, answer: AnswerText): unknown[] | string {
  if (!Array.isArray(messages) || messages.length === 0) return 'the request has no messages';
  const last = messages[messages.length - 1] as { role?: unknown; content?: unknown } | null;
  let content = answer.prefill;
  if (last?.role === 'assistant') {
    if (typeof last.content !== 'string') return "the request's own prefill is not plain text";
    if (!answer.text.startsWith(last.content)) content = last.content + content;
    answer.sent = content;
    return [...messages.slice(0, -1), { ...last, content }];
  }
  answer.sent = content;
  return [...messages, { role: 'assistant', content }];
}

/** What makes a continuation wrong for this body, or null: a grammar or schema applies to the
 *  new tokens only (the engine would open a new structure inside the old one), and an echo of
 *  the prompt would be sent back as its own continuation. */
function constrained(body: Record<string, any>): string | null {
  const rf = body.response_format;
  if (rf && typeof rf === 'object' && rf.type !== undefined && rf.type !== 'text') return `constrained output (response_format ${rf.type}) is not continued`;
  for (const key of ['guided_json', 'guided_regex', 'guided_choice', 'guided_grammar', 'grammar', 'json_schema', 'structured_outputs']) {
    if (body[key] !== undefined && body[key] !== null) return `constrained output (${key}) is not continued`;
  }
  if (body.format !== undefined && body.format !== '' && body.format !== null) return 'constrained output (format) is not continued';
  if (body.echo === true) return 'a completion that echoes its prompt is not continued';
  return null;
}

/** A token limit less what was generated, never below 1. */
function reduce(body: Record<string, any>, key: string, used: number, within?: string): void {
  const holder = within ? body[within] : body;
  if (holder && typeof holder[key] === 'number' && holder[key] > 0) holder[key] = Math.max(1, holder[key] - used);
}

export function continued(kind: ContinuationKind, original: unknown, answer: AnswerText, profile: Profile): Continued {
  if (typeof original !== 'object' || original === null || Array.isArray(original)) return 'the request body is not a JSON object';
  const body: Record<string, any> = structuredClone(original);
  const why = constrained(body);
  if (why) return why;
  const prefill = answer.prefill;
  const used = answer.used;
  answer.sent = prefill;
  switch (kind) {
    case 'chat':
    case 'messages': {
      const messages = withAssistant(body.messages, answer);
      if (typeof messages === 'string') return messages;
      body.messages = messages;
      for (const key of ['max_tokens', 'max_completion_tokens']) reduce(body, key, used);
      if (kind === 'chat') {
        for (const [key, value] of Object.entries(profile.api.continuation.chat_fields ?? {})) {
          const mine = body[key];
          body[key] = value && typeof value === 'object' && mine && typeof mine === 'object' ? { ...mine, ...value } : value;
        }
      }
      return { body };
    }
    case 'ollama_chat': {
      const messages = withAssistant(body.messages, answer);
      if (typeof messages === 'string') return messages;
      body.messages = messages;
      reduce(body, 'num_predict', used, 'options');
      return { body };
    }
    case 'ollama_generate': {
      if (typeof body.prompt !== 'string') return 'the prompt is not a string';
      reduce(body, 'num_predict', used, 'options');
      if (body.raw === true) return { body: { ...body, prompt: body.prompt + prefill } };
      for (const key of ['context', 'suffix', 'template']) {
        if (body[key] !== undefined && body[key] !== null && body[key] !== '')
          return `a templated api/generate with ${key} is not continued (api/chat cannot carry it)`;
      }
      // Templated: the same turn through api/chat, the answer so far its assistant message.
      const user: Record<string, unknown> = { role: 'user', content: body.prompt };
      if (body.images) user.images = body.images;
      const messages = [...(typeof body.system === 'string' ? [{ role: 'system', content: body.system }] : []), user, { role: 'assistant', content: prefill }];
      const { prompt: _p, system: _s, images: _i, template: _t, context: _c, suffix: _x, raw: _r, ...rest } = body;
      return { body: { ...rest, messages, stream: true }, path: '/api/chat' };
    }
    case 'completions':
    case 'llama_completion': {
      if (typeof body.prompt !== 'string') return 'the prompt is not a single string';
      body.prompt += prefill;
      reduce(body, kind === 'completions' ? 'max_tokens' : 'n_predict', used);
      return { body };
    }
  }
}
