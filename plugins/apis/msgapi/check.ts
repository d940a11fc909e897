// What the translator cannot work with. Passthrough checks none of this (the backend speaks the
// messages API and judges its own input); translation needs the fields it reads to have the
// shape it reads. Unknown fields, block types and roles-to-be are not problems: the translator
// drops what chat-completions cannot carry (request.ts). Each reason names the field.
import { isObject } from '../../../engine/api.js';

/** What is wrong with one content block of a type the translator reads, or undefined. */
function blockProblem(b: unknown, where: string): string | undefined {
  if (!isObject(b) || typeof b.type !== 'string') return `${where}: a content block is an object with a string type`;
  switch (b.type) {
    case 'text':
      return typeof b.text === 'string' ? undefined : `${where}.text: must be a string`;
    case 'image': {
      const src = b.source;
      const ok = isObject(src) && (src.type === 'url' ? typeof src.url === 'string' : typeof src.data === 'string' && typeof src.media_type === 'string');
      return ok ? undefined : `${where}.source: an image needs {type: base64, media_type, data} or {type: url, url}`;
    }
    case 'tool_use':
      return typeof b.name === 'string' ? undefined : `${where}.name: a tool_use block needs a name`;
    case 'tool_result':
      return b.content === undefined || typeof b.content === 'string' ? undefined : blocksProblem(b.content, `${where}.content`);
    default:
      return undefined; // other block types are dropped by the translator
  }
}

function blocksProblem(content: unknown, where: string): string | undefined {
  if (!Array.isArray(content)) return `${where}: must be a string or an array of content blocks`;
  for (const [i, b] of content.entries()) {
    const why = blockProblem(b, `${where}[${i}]`);
    if (why) return why;
  }
  return undefined;
}

const ROLES = new Set(['user', 'assistant', 'system']);

/** Why a messages request cannot be translated to chat-completions, or undefined when it can.
 *  `maxTokensRequired`: a messages request must bound its output; count_tokens needs no bound. */
export function translationProblem(body: unknown, maxTokensRequired = true): string | undefined {
  if (!isObject(body)) return 'the body must be a JSON object';
  if (!Array.isArray(body.messages)) return 'messages: an array of {role, content} is required';
  for (const [i, m] of body.messages.entries()) {
    if (!isObject(m) || typeof m.role !== 'string' || !ROLES.has(m.role)) return `messages[${i}].role: must be user, assistant or system`;
    if (typeof m.content !== 'string') {
      const why = blocksProblem(m.content, `messages[${i}].content`);
      if (why) return why;
    }
  }
  if (body.system !== undefined && typeof body.system !== 'string') {
    const why = blocksProblem(body.system, 'system');
    if (why) return why;
  }
  const max = body.max_tokens;
  if ((maxTokensRequired || max !== undefined) && (typeof max !== 'number' || !Number.isInteger(max) || max < 1))
    return 'max_tokens: a positive integer is required';
  const stops = body.stop_sequences;
  if (stops !== undefined && (!Array.isArray(stops) || stops.some((s) => typeof s !== 'string'))) return 'stop_sequences: must be an array of strings';
  const tools = body.tools;
  if (tools !== undefined && (!Array.isArray(tools) || tools.some((t) => !isObject(t) || typeof t.name !== 'string'))) return 'tools: each tool needs a name';
  const choice = body.tool_choice;
  if (choice !== undefined && typeof choice !== 'string' && !(isObject(choice) && typeof choice.type === 'string'))
    return 'tool_choice: must be auto, any, none or {type, name}';
  return undefined;
}
