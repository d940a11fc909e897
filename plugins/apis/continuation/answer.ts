// What every API's answer so far has in common: its text, read event by event, what would stop
// it from being continued, and how a continuation's first words join it. The prefill sent is the
// text without its trailing whitespace (engines tokenize a prefill better so, and the messages
// API refuses one that ends in whitespace); the whitespace the client already has is taken off
// the front of the continuation's first words when they repeat it.
import type { StreamEvent, Transcript } from '../../../engine/api.js';

export abstract class AnswerText implements Transcript {
  text = '';
  /** Events that carried answer text: a lower bound of the tokens generated (engines stream one
   *  or more tokens per event), used when the backend reported no count. */
  contentEvents = 0;
  /** Tokens generated so far, when the backend reported them (a usage block mid-stream). */
  reportedTokens: number | undefined;
  /** The answer text the continuation request carried (the prefill, after any of the client's
   *  own): what an engine that repeats it starts with. */
  sent: string | undefined;
  /** Why it cannot be continued, once known. */
  protected blocked: string | null = null;
  /** Reasoning began and no answer text followed yet. */
  protected reasoning = false;

  abstract read(ev: StreamEvent): void;
  abstract splicer(restart?: boolean): (ev: StreamEvent) => StreamEvent[] | null;

  get chars(): number {
    return this.text.length;
  }

  blocker(): string | null {
    if (this.blocked) return this.blocked;
    if (this.reasoning && this.text === '') return 'it broke in its reasoning, which another engine cannot resume';
    if (this.text.trim() === '') return 'no answer text reached the client yet';
    return null;
  }

  /** The text an engine is asked to continue. */
  get prefill(): string {
    return this.text.trimEnd();
  }

  /** Tokens generated so far: reported, else the lower bound. */
  get used(): number {
    return this.reportedTokens ?? this.contentEvents;
  }

  protected addText(piece: unknown): void {
    if (typeof piece !== 'string' || piece === '') return;
    this.text += piece;
    this.contentEvents++;
  }

  protected block(why: string): void {
    this.blocked ??= why;
  }

  /** Per continuation attempt: how its words join the client's. Some engines repeat the
   *  prefill at the start of their answer (llama.cpp's chat route does): that echo is dropped,
   *  held back while it may still be one. Then the whitespace the client already has is taken
   *  off the front when the continuation repeats it. Returns what to send of each piece.
   *  `restart`: the answer asked for again from its start, without a prefill (an engine that
   *  refuses one): it must repeat everything the client has, exactly, before its rest is sent;
   *  null once it differs. */
  joiner(restart = false): (piece: string) => string | null {
    const sent = restart ? this.text : (this.sent ?? this.prefill);
    let overlap = restart ? '' : this.text.slice(this.prefill.length);
    let echo: string | null = '';
    let differs = false;
    return (piece) => {
      if (differs) return null;
      if (echo !== null) {
        const seen = echo + piece;
        if (seen.length < sent.length && sent.startsWith(seen)) {
          echo = seen;
          return '';
        }
        echo = null;
        if (seen.startsWith(sent)) piece = seen.slice(sent.length);
        else if (restart) {
          differs = true;
          return null;
        } else piece = seen;
      }
      let i = 0;
      while (overlap !== '' && i < piece.length && piece[i] === overlap[0]) {
        overlap = overlap.slice(1);
        i++;
      }
      if (i < piece.length) overlap = '';
      return piece.slice(i);
    };
  }
}

/** An event's data as JSON, or undefined. */
export function json(ev: StreamEvent): any {
  try {
    return JSON.parse(ev.data);
  } catch {
    return undefined;
  }
}

export const filled = (v: unknown): boolean => v !== undefined && v !== null && v !== '' && !(Array.isArray(v) && v.length === 0);

/** The same event with new data. */
export const withData = (ev: StreamEvent, v: unknown): StreamEvent => ({ name: ev.name, data: JSON.stringify(v) });
