// The engines' own streams: llama.cpp's native completion (SSE {content, stop}) and Ollama's
// NDJSON api/chat ({message}) and api/generate ({response}). A continuation of a templated
// api/generate goes to api/chat (the only way to continue a templated answer there): its lines
// are written back as api/generate lines. The final line's counts are the continuation's; it is
// marked `gw_partial: true`, since the broken part reported none.
import type { ContinuationApi, StreamEvent } from '../../../engine/api.js';
import { AnswerText, filled, json, withData } from './answer.js';

class NativeAnswer extends AnswerText {
  constructor(private readonly field: 'content' | 'message' | 'response') {
    super();
  }

  /** The answer text of one event, and its reasoning and tool calls. */
  private parts(v: any): { text: unknown; thinking: unknown; tools: unknown } {
    if (this.field === 'content') return { text: v.content, thinking: undefined, tools: undefined };
    const m = this.field === 'message' || v.message !== undefined ? (v.message ?? {}) : { content: v.response, thinking: v.thinking };
    return { text: m.content, thinking: m.thinking, tools: m.tool_calls };
  }

  read(ev: StreamEvent): void {
    const v = json(ev);
    if (typeof v !== 'object' || v === null) return;
    const p = this.parts(v);
    if (filled(p.tools)) this.block('it broke inside a tool call');
    if (filled(p.thinking)) {
      if (this.text !== '') this.block('it went back to reasoning after its answer began');
      this.reasoning = true;
    }
    this.addText(p.text);
  }

  splicer(restart = false): (ev: StreamEvent) => StreamEvent[] | null {
    const join = this.joiner(restart);
    let started = false;
    return (ev) => {
      const v = json(ev);
      if (typeof v !== 'object' || v === null || v.error !== undefined) return [ev];
      // A templated api/generate continued through api/chat: back to its own shape.
      if (this.field === 'response' && v.message !== undefined) {
        const { message, ...rest } = v;
        Object.assign(v, rest, { response: message?.content ?? '' });
        delete v.message;
      }
      const ended = v.stop === true || v.done === true;
      // A restart's end before it has passed the client's text would finish a shorter answer.
      if (ended && !join.endsMayPass()) return [];
      if (ended && !restart) v.gw_partial = true;
      const key = this.field === 'content' ? 'content' : this.field === 'response' ? 'response' : null;
      const piece = key ? v[key] : v.message?.content;
      if (typeof piece === 'string' && piece !== '') {
        const rest = join.next(piece);
        if (rest === null) return null;
        if (rest === '' && !ended) return [];
        if (key) v[key] = rest;
        else v.message.content = rest;
        started = true;
      } else if (!started && !ended) return [];
      return [withData(ev, v)];
    };
  }
}

export const LLAMA_COMPLETION: ContinuationApi = { name: 'llama_completion', transcript: () => new NativeAnswer('content') };
export const OLLAMA_CHAT: ContinuationApi = { name: 'ollama_chat', transcript: () => new NativeAnswer('message') };
export const OLLAMA_GENERATE: ContinuationApi = { name: 'ollama_generate', transcript: () => new NativeAnswer('response') };
