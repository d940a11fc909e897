// The text a fake engine "evaluates" for a generation request: what its prefix cache and prefill
// delay count. Chat-like bodies (chat completions, the messages API, Ollama's api/chat): the system
// prompt and tool definitions, then each message as a role marker and its content, as a chat
// template renders them; prompt bodies (completions, llama.cpp's /completion and /infill, Ollama's
// api/generate, /generate): the prompt.

const turn = (role: string, text: string) => `<|${role}|>\n${text}\n`;

/** A string, or an array of parts (text parts by their text; others, images say, as JSON). */
function contentText(c: unknown): string {
  if (typeof c === 'string') return c;
  if (Array.isArray(c)) return c.map((p) => (typeof p === 'string' ? p : typeof p?.text === 'string' ? p.text : JSON.stringify(p))).join('');
  return c == null ? '' : JSON.stringify(c);
}

export function promptText(j: any): string | undefined {
  if (!j || typeof j !== 'object') return undefined;
  const system = j.system !== undefined ? turn('system', contentText(j.system)) : '';
  const tools = Array.isArray(j.tools) && j.tools.length ? turn('tools', JSON.stringify(j.tools)) : '';
  if (Array.isArray(j.messages)) {
    return (
      system + tools + j.messages.map((m: any) => turn(String(m?.role), contentText(m?.content) + (m?.tool_calls ? JSON.stringify(m.tool_calls) : ''))).join('')
    );
  }
  const prompt = j.prompt ?? j.text ?? j.inputs ?? (j.input_prefix !== undefined ? `${contentText(j.input_prefix)}${contentText(j.input_suffix)}` : undefined);
  return prompt === undefined ? undefined : system + contentText(prompt);
}

/** What stays cached once the reply is made: the prompt with the reply as the assistant's turn, so
 *  the next turn (the history, the reply, a new message) finds all but its new message. */
export function servedText(j: any, prompt: string, reply: string): string {
  return Array.isArray(j?.messages) ? prompt + turn('assistant', reply) : prompt + reply;
}
