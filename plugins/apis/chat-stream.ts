// Reading a chat-completions SSE body as it arrives, for the translators that turn it into
// another API's events (the messages API's, the Responses API's): lines split across chunks are
// joined, each byte is searched once, a line past 1 MiB is skipped through its end, chunks that
// are not JSON are counted and skipped, `usage` is kept, an `error` chunk fails the stream. A
// translator says what each choice becomes, what closes the stream and what a failure looks like.
import { StringDecoder } from 'node:string_decoder';

const MAX_LINE = 1024 * 1024;

/** Tokens a backend reported (prompt, completion, prompt tokens served from its cache). */
export interface Usage {
  input?: number;
  output?: number;
  cached?: number;
  /** Of the output, reasoning (completion_tokens_details.reasoning_tokens). */
  reasoning?: number;
}

/** A token count as reported, when it is one. */
export const tokenCount = (n: unknown): number | undefined => (typeof n === 'number' && Number.isFinite(n) && n >= 0 ? n : undefined);

/** A chat-completions `usage` object as token counts. */
export function usageOf(u: {
  prompt_tokens?: unknown;
  completion_tokens?: unknown;
  prompt_tokens_details?: { cached_tokens?: unknown } | null;
  completion_tokens_details?: { reasoning_tokens?: unknown } | null;
}): Usage {
  return {
    input: tokenCount(u.prompt_tokens),
    output: tokenCount(u.completion_tokens),
    cached: tokenCount(u.prompt_tokens_details?.cached_tokens),
    reasoning: tokenCount(u.completion_tokens_details?.reasoning_tokens),
  };
}

/** One choice of a chat-completions chunk, as the translators read it. */
export interface ChatChoiceDelta {
  delta?: { content?: unknown; reasoning_content?: unknown; reasoning?: unknown; tool_calls?: ToolCallDelta[] };
  finish_reason?: string | null;
  stop_reason?: unknown;
}
export interface ToolCallDelta {
  index?: number;
  id?: string;
  function?: { name?: string; arguments?: string };
}

/** The reasoning text of a delta or message: `reasoning_content` (llama.cpp, vLLM, DeepSeek) or
 *  `reasoning` (Ollama, OpenRouter, newer vLLM). */
export function reasoningOf(m: { reasoning_content?: unknown; reasoning?: unknown } | undefined): string {
  const r = m?.reasoning_content ?? m?.reasoning;
  return typeof r === 'string' ? r : '';
}

export abstract class ChatStreamReader {
  /** Backend chunks that were not JSON and were skipped. */
  malformed = 0;
  done = false;
  private readonly decoder = new StringDecoder('utf8');
  private pending = '';
  private skippingLongLine = false;
  private reported: Usage | null = null;

  /** The tokens the backend reported in a `usage` chunk (none: null; estimates are not usage). */
  get usage(): Usage | null {
    return this.reported;
  }

  /** Output for a piece of the backend's SSE body (possibly none yet). */
  feed(chunk: Buffer): string {
    if (this.done) return '';
    let text = this.decoder.write(chunk);
    let out = '';
    while (text.length) {
      const nl = text.indexOf('\n');
      if (this.skippingLongLine) {
        if (nl < 0) return out;
        this.skippingLongLine = false;
        text = text.slice(nl + 1);
        continue;
      }
      if (nl < 0) {
        this.pending += text;
        if (this.pending.length > MAX_LINE) {
          // A line this long is no chunk we can use: drop it through its end.
          this.malformed++;
          this.pending = '';
          this.skippingLongLine = true;
        }
        return out;
      }
      const line = (this.pending + text.slice(0, nl)).replace(/\r$/, '');
      this.pending = '';
      text = text.slice(nl + 1);
      out += this.line(line);
      if (this.done) return out;
    }
    return out;
  }

  /** The closing output (if [DONE] did not already produce it). */
  end(): string {
    if (this.done) return '';
    const rest = this.pending + this.decoder.end();
    this.pending = '';
    const out = rest.trim() ? this.line(rest.trim()) : '';
    return out + (this.done ? '' : this.finish());
  }

  /** The backend failed mid-stream: the failure, and nothing after it. */
  fail(message: string): string {
    if (this.done) return '';
    this.done = true;
    return this.failure(message);
  }

  /** What one choice of a chunk becomes. */
  protected abstract choice(choice: ChatChoiceDelta): string;
  /** What ends a finished stream (called once). */
  protected abstract closing(): string;
  /** What ends a failed stream (called once). */
  protected abstract failure(message: string): string;

  private finish(): string {
    const out = this.closing();
    this.done = true;
    return out;
  }

  private line(line: string): string {
    if (!line.startsWith('data:')) return ''; // comments, event names, blank separators
    const data = line.slice(5).trim();
    if (data === '[DONE]') return this.finish();
    let chunk: any;
    try {
      chunk = JSON.parse(data);
    } catch {
      this.malformed++;
      return '';
    }
    const usage = chunk?.usage;
    if (usage && typeof usage === 'object') {
      const u = usageOf(usage);
      if (u.input !== undefined || u.output !== undefined)
        this.reported = { ...this.reported, ...Object.fromEntries(Object.entries(u).filter(([, v]) => v !== undefined)) };
    }
    if (chunk?.error) return this.fail(typeof chunk.error === 'string' ? chunk.error : (chunk.error.message ?? 'backend error'));
    const choice = chunk?.choices?.[0];
    return choice && typeof choice === 'object' ? this.choice(choice) : '';
  }
}
