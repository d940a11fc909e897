// What the routing layer must know of the inference APIs the proxy and messages routes relay, and
// knows only from here (the terminal steps hand it in as their policy's `api`): how their streams'
// events read — chat completions, completions, the messages API, the Responses API, Ollama's and
// llama.cpp's native routes — and how a backend says a prompt is longer than the context window.
import type { ApiShape, EventKind, StreamShape } from '../../engine/api.js';
import { INFERENCE_USAGE } from './usage-fields.js';

/** Event names (SSE `event:` or a JSON `type`) that carry no content, recognised positively:
 *  anything not known to be empty counts as content, so an unknown format is never held back. */
const EMPTY_EVENTS = new Set([
  // messages API
  'message_start',
  'content_block_start',
  'ping',
  // Responses API (response.queued: the background-mode twin of response.in_progress)
  'response.created',
  'response.in_progress',
  'response.queued',
  'response.output_item.added',
  'response.content_part.added',
]);
const TERMINATOR_EVENTS = new Set(['message_stop', 'response.completed', 'response.incomplete']);
const ERROR_EVENTS = new Set(['error', 'response.failed']);

const filled = (v: unknown): boolean => v !== undefined && v !== null && v !== '' && !(Array.isArray(v) && v.length === 0);

/** Whether a chat-completions delta (or a message) carries anything a client would show or use. */
function deltaHasContent(d: any): boolean {
  if (typeof d !== 'object' || d === null) return filled(d);
  return filled(d.content) || filled(d.reasoning_content) || filled(d.reasoning) || filled(d.refusal) || filled(d.tool_calls) || filled(d.function_call);
}

/** One parsed event's kind. `name`: its SSE event name ('' when none). */
function classify(v: any, name: string): EventKind {
  if (ERROR_EVENTS.has(name)) return 'error';
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return 'content';
  if (v.error !== undefined && v.error !== null && v.error !== false) return 'error';
  // vLLM before its error envelope: {"object": "error", "message", "type", "code"}
  if (v.object === 'error') return 'error';
  const type = typeof v.type === 'string' ? v.type : name;
  if (ERROR_EVENTS.has(type)) return 'error';
  if (TERMINATOR_EVENTS.has(type)) return 'terminator';
  if (v.done === true || v.stop === true) return 'terminator';
  if (EMPTY_EVENTS.has(type)) return 'none';
  const choices = v.choices;
  if (Array.isArray(choices)) {
    let content = false;
    for (const c of choices) {
      if (typeof c !== 'object' || c === null) return 'content';
      if (typeof c.finish_reason === 'string' && c.finish_reason !== '') return 'terminator';
      if (c.delta !== undefined || c.message !== undefined) {
        if (deltaHasContent(c.delta ?? c.message) || filled(c.text)) content = true;
      } else if ('text' in c) {
        if (filled(c.text)) content = true;
      } else content = true; // a choice of a shape we do not know
    }
    return content ? 'content' : 'none';
  }
  // llama.cpp's native /completion: {content, stop: false}
  if (v.stop === false && typeof v.content === 'string') return v.content === '' ? 'none' : 'content';
  // Ollama's /api/chat {message, done: false} and /api/generate {response, done: false}
  if (v.done === false) {
    if (filled(v.thinking)) return 'content';
    if (typeof v.message === 'object' && v.message !== null)
      return filled(v.message.content) || filled(v.message.thinking) || filled(v.message.tool_calls) ? 'content' : 'none';
    if (typeof v.response === 'string') return v.response === '' ? 'none' : 'content';
  }
  return 'content';
}

/** The backend's own words in an error event: {error: "…"}, {error: {message}}, vLLM's
 *  {message}, the Responses API's {response: {error: {message}}}. */
function errorMessage(v: any): string | undefined {
  const e = v?.error;
  if (typeof e === 'string') return e;
  if (typeof e?.message === 'string') return e.message;
  if (typeof v?.message === 'string') return v.message;
  if (typeof v?.response?.error?.message === 'string') return v.response.error.message;
  return undefined;
}

export const INFERENCE_STREAMS: StreamShape = {
  classify,
  // The chat-completions terminator is not JSON; an error event's data need not be.
  sentinels: new Map([['[DONE]', 'terminator']]),
  errorEvents: ERROR_EVENTS,
  alwaysParsed: new Set([...TERMINATOR_EVENTS, ...ERROR_EVENTS]),
  // llama.cpp's server reports a failure as an `error: {json}` line.
  errorField: 'error',
  // Read as latin1 (each byte one char: no decoding): what ends a stream or reports an error.
  mayMatter: /error|stop|"done"\s*:\s*true|response\.(?:completed|incomplete|failed)|finish_reason"\s*:\s*"/,
  errorMessage,
  terminators: '[DONE], finish_reason, message_stop or done: true',
};

/** How the engines word a prompt longer than the context window (OpenAI, vLLM, llama.cpp,
 *  Ollama, the messages API). */
const CONTEXT_ERROR =
  /context.{0,20}(length|window|size)|maximum context|too (long|many tokens)|exceeds? (the )?(available |max(imum)? )?(context|tokens)|n_ctx|prompt is too long/i;

export const INFERENCE_API: ApiShape = {
  streams: INFERENCE_STREAMS,
  contextLengthError: (text) => CONTEXT_ERROR.test(text),
  usage: INFERENCE_USAGE,
};
