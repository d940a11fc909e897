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

  /** Per continuation attempt: how its words join the client's (Joiner). */
  joiner(restart = false): Joiner {
    return restart ? new Joiner(this.text, '', true) : new Joiner(this.sent ?? this.prefill, this.text.slice(this.prefill.length), false);
  }
}

/** How one continuation's words join the client's. Some engines repeat the prefill at the start
 *  of their answer (llama.cpp's chat route does): that echo is dropped, held back while it may
 *  still be one. Then the whitespace the client already has is taken off the front when the
 *  continuation repeats it. `restart`: the answer asked for again from its start, without a
 *  prefill (an engine that refuses one): it must repeat everything the client has, exactly,
 *  before its rest is sent (`passed`); null once it differs. */
export class Joiner {
  private echo: string | null = '';
  private differs = false;

  constructor(
    private readonly sent: string,
    private overlap: string,
    private readonly restart: boolean,
  ) {}

  /** The echo is over: what follows is new (a restart's end events may go out from now on). */
  get passed(): boolean {
    return this.echo === null && !this.differs;
  }

  /** What to send of this piece ('': nothing yet); null: a restart that differs. */
  next(piece: string): string | null {
    if (this.differs) return null;
    if (this.echo !== null) {
      const seen = this.echo + piece;
      if (seen.length < this.sent.length && this.sent.startsWith(seen)) {
        this.echo = seen;
        return '';
      }
      this.echo = null;
      if (seen.startsWith(this.sent)) piece = seen.slice(this.sent.length);
      else if (this.restart) {
        this.differs = true;
        return null;
      } else piece = seen;
    }
    let i = 0;
    while (this.overlap !== '' && i < piece.length && piece[i] === this.overlap[0]) {
      this.overlap = this.overlap.slice(1);
      i++;
    }
    if (i < piece.length) this.overlap = '';
    return piece.slice(i);
  }

  /** May an event that ends the answer go out? Not a restart's before it has passed the client's
   *  text (it would end a shorter answer as if finished). */
  endsMayPass(): boolean {
    return !this.restart || this.passed;
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
