// A stream's events one by one, for the rare paths that need them whole (reading what a broken
// stream relayed, splicing a continuation into it), and written back in the same framing. SSE:
// an event is its name (`event:`, '' when none) and its data lines joined; comments and other
// fields are dropped. NDJSON: each non-blank line is one event's data. The hot path never comes
// here: it only watches (stream-watch.ts).
import type { StreamFormat } from './stream-watch.js';

export interface StreamEvent {
  /** The SSE event name; '' when none (always, for NDJSON). */
  name: string;
  data: string;
}

export class EventSplitter {
  private rest = '';
  private name = '';
  private data: string[] = [];
  private readonly decoder = new TextDecoder();

  constructor(private readonly format: StreamFormat) {}

  /** The events the bytes complete (split anywhere, even inside a character). */
  feed(chunk: Buffer | string): StreamEvent[] {
    const text = this.rest + (typeof chunk === 'string' ? chunk : this.decoder.decode(chunk, { stream: true }));
    const out: StreamEvent[] = [];
    let pos = 0;
    for (let nl = text.indexOf('\n'); nl !== -1; nl = text.indexOf('\n', pos)) {
      this.line(text.slice(pos, nl > pos && text.charCodeAt(nl - 1) === 13 ? nl - 1 : nl), out);
      pos = nl + 1;
    }
    this.rest = text.slice(pos);
    return out;
  }

  /** The stream ended: a last line or event without its end is read as if it had one. */
  end(): StreamEvent[] {
    const out: StreamEvent[] = [];
    if (this.rest) this.line(this.rest, out);
    this.rest = '';
    if (this.format === 'sse') this.line('', out);
    return out;
  }

  private line(line: string, out: StreamEvent[]): void {
    if (this.format === 'ndjson') {
      if (line.trim() !== '') out.push({ name: '', data: line });
      return;
    }
    if (line === '') {
      if (this.data.length > 0) out.push({ name: this.name, data: this.data.join('\n') });
      this.name = '';
      this.data = [];
      return;
    }
    const colon = line.indexOf(':');
    if (colon === 0) return; // a comment
    const field = colon === -1 ? line : line.slice(0, colon);
    const value = colon === -1 ? '' : line.slice(line.charCodeAt(colon + 1) === 32 ? colon + 2 : colon + 1);
    if (field === 'data') this.data.push(value);
    else if (field === 'event') this.name = value;
    else if (field === 'error') {
      // llama.cpp's `error: {json}` line: an error event of that name.
      this.name = 'error';
      this.data.push(value);
    }
  }
}

/** One event written in its stream's framing. */
export function frame(format: StreamFormat, ev: StreamEvent): string {
  if (format === 'ndjson') return `${ev.data}\n`;
  const data = ev.data.includes('\n')
    ? ev.data
        .split('\n')
        .map((d) => `data: ${d}\n`)
        .join('')
    : `data: ${ev.data}\n`;
  return `${ev.name ? `event: ${ev.name}\n` : ''}${data}\n`;
}
