// count_tokens where no backend counts: the spec's estimate, total characters / 4 (integer) over
// the system text, message text, tool names and inputs (tool definitions and tool_use blocks),
// and tool result content. It reads what it can and skips the rest: the request was checked for
// JSON and a model only (the translator's checks are not the estimate's business).
import { isObject } from '../../../engine/api.js';

const str = (v: unknown): number => (typeof v === 'string' ? v.length : 0);
const json = (v: unknown): number => JSON.stringify(v ?? {})?.length ?? 0;

/** Characters of text in a string or in the text blocks of an array. */
function textChars(content: unknown): number {
  if (typeof content === 'string') return content.length;
  if (!Array.isArray(content)) return 0;
  let n = 0;
  for (const b of content) if (isObject(b) && b.type === 'text') n += str(b.text);
  return n;
}

function blockChars(b: unknown): number {
  if (!isObject(b)) return 0;
  switch (b.type) {
    case 'text':
      return str(b.text);
    case 'tool_use':
      return str(b.name) + json(b.input);
    case 'tool_result':
      return textChars(b.content);
    default:
      return 0;
  }
}

export function estimateInputTokens(req: unknown): number {
  if (!isObject(req)) return 0;
  let chars = textChars(req.system);
  if (Array.isArray(req.tools)) for (const t of req.tools) if (isObject(t)) chars += str(t.name) + json(t.input_schema);
  if (Array.isArray(req.messages)) {
    for (const m of req.messages) {
      if (!isObject(m)) continue;
      if (typeof m.content === 'string') chars += m.content.length;
      else if (Array.isArray(m.content)) for (const b of m.content) chars += blockChars(b);
    }
  }
  return Math.floor(chars / 4);
}
