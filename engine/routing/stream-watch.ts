// What a streamed backend reply has shown so far, chunk by chunk: whether its first content has
// arrived (until then the relay holds the reply back and the request can still fail over),
// whether the backend sent an error event or a malformed one, and whether the stream's terminator
// came (a stream that just stops is never a success). Pure: no I/O, no timers. The watcher reads
// the two framings (SSE, NDJSON); what an event means comes from the API's StreamShape, which the
// terminal step hands in.
//
// Cost: each byte is searched once for line ends with Buffer.indexOf; a line inside one chunk is
// decoded straight from it (no copy); only the unfinished last line is kept between chunks; each
// event's data is JSON.parse'd once. Lines end with LF or CRLF (a lone CR, which the SSE spec also
// allows, is sent by no inference server we know and is not a line end here).

import { COLON, CR, fieldValue, LF, OPEN_BRACE, objectText } from './event-bytes.js';
import { mergeReported, type Reported, type UsageShape } from './usage.js';

/** Content types of the two stream formats (the one definition; broken-stream.ts uses them too). */
export const SSE_CONTENT_TYPE = /^text\/event-stream/i;
export const NDJSON_CONTENT_TYPE = /^application\/(x-)?(ndjson|jsonl|jsonlines)\b/i;

export type StreamFormat = 'sse' | 'ndjson';

/** The stream format of a reply's content type, or null (not a stream the watcher understands). */
export function streamFormatOf(contentType: string | undefined): StreamFormat | null {
  if (contentType === undefined) return null;
  if (SSE_CONTENT_TYPE.test(contentType)) return 'sse';
  if (NDJSON_CONTENT_TYPE.test(contentType)) return 'ndjson';
  return null;
}

export type Seen = 'none' | 'content' | 'error' | 'malformed';

/** An event (with the lines of its block) or an unfinished line longer than this is malformed. */
export const MAX_EVENT_BYTES = 1024 * 1024;
const PROBLEM_CHARS = 200;
const EXCERPT_CHARS = 40;

/** What one event is to the stream: nothing yet (a role chunk, a keep-alive event), content,
 *  its terminator, an error. */
export type EventKind = 'none' | 'content' | 'terminator' | 'error';

/** How the events of an API's streams read: what the watcher is told by the terminal step (its
 *  policy's api), never knows itself. */
export interface StreamShape {
  /** One event's kind, from its data parsed as JSON and its SSE event name ('' when none). */
  classify(value: unknown, name: string): EventKind;
  /** Event data that is not JSON but has a meaning ('[DONE]'), looked up before parsing. */
  readonly sentinels: ReadonlyMap<string, EventKind>;
  /** SSE event names that are errors whatever their data (the data need not be JSON). */
  readonly errorEvents: ReadonlySet<string>;
  /** SSE event names whose data is always parsed, even after the first content. */
  readonly alwaysParsed: ReadonlySet<string>;
  /** An SSE field besides `data` that carries an error event's data (llama.cpp's `error:`). */
  readonly errorField?: string;
  /** After the first content an event is parsed only when its bytes (read as latin1) match this:
   *  it may end the stream or carry an error. Every other event is only checked for shape. */
  readonly mayMatter: RegExp;
  /** The backend's own words in an error event, if it has any. */
  errorMessage(value: unknown): string | undefined;
  /** How a stream of this API ends, in words, for the error a stream without it ends with. */
  readonly terminators: string;
}

/** Data that did not parse. */
const NOT_JSON = Symbol('not JSON');
/** The data of a skipped event (its text never made). */
const SKIPPED = '\u0000skipped';
/** The data of an event after the stream's end whose usage was read from its bytes (not parsed, not content). */
const USAGE_READ = '\u0000usage';

const clip = (s: string, n: number): string => (s.length > n ? `${s.slice(0, n - 1)}…` : s);

export class StreamWatch {
  /** What the stream's events reported of the tokens used, while they are counted. */
  reported: Reported | null = null;
  /** Content events seen (about a token each: the output's estimate when none is reported). */
  events = 0;
  private _hasContent = false;
  private _complete = false;
  private _problem = '';
  /** An error or malformed event was seen: the stream is over for the kernel; later chunks are ignored. */
  private stopped = false;
  private first = true;
  /** The unfinished last line, in pieces (copies), and its length. */
  private tail: Buffer[] = [];
  private tailBytes = 0;
  // The SSE event being read: its name, its data lines, its size so far, and where it began in
  // the chunk being fed (0 when it began in an earlier one; -1: no event open).
  private evName = '';
  private evData: string | null = null;
  private evMore: string[] | null = null;
  private evBytes = 0;
  private evStart = -1;
  /** Bytes fed so far, and where the open event began in them (an offset into the stream). */
  private fed = 0;
  private fedBefore = 0;
  private evStartAt = 0;
  private badAt = -1;

  /** `usage`: where the API's events report the tokens used, when they are counted. */
  constructor(
    private readonly format: StreamFormat,
    private readonly shape: StreamShape,
    private readonly usage: UsageShape | null = null,
  ) {}

  get hasContent(): boolean {
    return this._hasContent;
  }
  get complete(): boolean {
    return this._complete;
  }
  get problem(): string {
    return this._problem;
  }
  /** Where the complete events fed so far end, as an offset into the stream: the bytes after it
   *  are an event not finished yet (a relay that sends whole events only keeps them back). */
  get completeTo(): number {
    return this.evStart === -1 ? this.fed : this.evStartAt;
  }
  /** Where the error or malformed event that stopped the stream began (an offset into the
   *  stream); -1: none. */
  get badEventAt(): number {
    return this.badAt;
  }

  /** The event that opens here (`at`: in the chunk being fed). */
  private open(at: number): void {
    this.evStart = at;
    this.evStartAt = this.fedBefore + at;
  }

  /** Feed the next chunk as it came from the backend (split anywhere). Returns 'error' or
   *  'malformed' as soon as one is seen (the rest of the chunk is not examined, and later chunks
   *  are ignored), else 'content' when this chunk carried the stream's first content, else 'none'. */
  feed(chunk: Buffer): Seen {
    if (this.stopped || chunk.length === 0) return 'none';
    this.fedBefore = this.fed;
    this.fed += chunk.length;
    let seen: Seen = 'none';
    if (this.evStart > 0) this.evStart = 0;
    // The usual chunk once content flows: one whole event that may go unparsed, counted as content.
    if (this.evStart === -1 && this.tailBytes === 0 && this.routineEvent(chunk)) {
      this.events++;
      return 'none';
    }
    let pos = 0;
    if (this.tailBytes > 0) {
      const nl = chunk.indexOf(LF);
      if (nl === -1) return this.keep(chunk, 0);
      // The one copy: the unfinished line from earlier chunks joined with its end.
      const line = Buffer.concat([...this.tail, chunk.subarray(0, nl)]);
      this.tail = [];
      this.tailBytes = 0;
      const r = this.line(line, 0, line.length, 0);
      if (r !== 'none') {
        if (r !== 'content') return r;
        seen = r;
      }
      pos = nl + 1;
    }
    while (pos < chunk.length) {
      const nl = chunk.indexOf(LF, pos);
      if (nl === -1) {
        const r = this.keep(chunk, pos);
        return r === 'none' ? seen : r;
      }
      const r = this.line(chunk, pos, nl, pos);
      if (r !== 'none') {
        if (r !== 'content') return r;
        seen = r;
      }
      pos = nl + 1;
    }
    return seen;
  }

  /** Whether the chunk is exactly one event — an SSE `data:` line and its blank line, or one
   *  NDJSON line (LF line ends) — that may go unparsed (unparsed(): the stream has content, has
   *  not ended, and the event names nothing that may end it or report an error). What the line
   *  by line reading below would find, without its steps. */
  private routineEvent(chunk: Buffer): boolean {
    if (!this._hasContent || this._complete) return false;
    const n = chunk.length;
    if (n > MAX_EVENT_BYTES || chunk[n - 1] !== LF) return false;
    if (this.format === 'ndjson') return chunk.indexOf(LF) === n - 1 && this.unparsed(chunk, 0, n - 1) === SKIPPED;
    if (n < 9 || chunk[n - 2] !== LF || chunk.indexOf(LF) !== n - 2) return false;
    const v = fieldValue(chunk, 0, n - 2, 'data');
    return v !== -1 && this.unparsed(chunk, v, n - 2) === SKIPPED;
  }

  /** The stream ended: its last line (NDJSON without a final newline) and its last event (SSE
   *  without the blank line after it) are read as if they had been closed, as clients read them.
   *  Returns whether the stream was complete. */
  end(): boolean {
    if (this.stopped) return this._complete;
    if (this.tailBytes > 0) {
      const line = Buffer.concat(this.tail, this.tailBytes);
      this.tail = [];
      this.tailBytes = 0;
      if (this.line(line, 0, line.length, 0) !== 'none' && this.stopped) return this._complete;
    }
    if (this.format === 'sse' && this.evData !== null) this.sseLine(Buffer.alloc(0), 0, 0, 0);
    return this._complete;
  }

  /** Keep chunk[from..] as (part of) the unfinished line, within the size bound. */
  private keep(chunk: Buffer, from: number): Seen {
    // No event open: this unfinished line begins one (NDJSON: every line is one).
    if (this.evStart === -1) this.open(from);
    this.tailBytes += chunk.length - from;
    if (this.evBytes + this.tailBytes > MAX_EVENT_BYTES) return this.tooLong();
    this.tail.push(Buffer.from(chunk.subarray(from)));
    return 'none';
  }

  private tooLong(): Seen {
    this.tail = [];
    this.tailBytes = 0;
    return this.bad('malformed', `malformed stream: an event longer than ${MAX_EVENT_BYTES} bytes`);
  }

  private bad(seen: 'error' | 'malformed', problem: string): Seen {
    this.badAt = this.evStart === -1 ? this.fedBefore : this.evStartAt;
    this._problem = problem;
    this.stopped = true;
    this.resetEvent();
    return seen;
  }

  private resetEvent(): void {
    this.evName = '';
    this.evData = null;
    this.evMore = null;
    this.evBytes = 0;
    this.evStart = -1;
  }

  /** One complete line: buf[s..e) without its LF. `at`: where it begins in the chunk being fed. */
  private line(buf: Buffer, s: number, e: number, at: number): Seen {
    if (e > s && buf[e - 1] === CR) e--;
    if (this.first) {
      this.first = false;
      // A byte-order mark before the first line is not part of it.
      if (e - s >= 3 && buf[s] === 0xef && buf[s + 1] === 0xbb && buf[s + 2] === 0xbf) s += 3;
    }
    return this.format === 'sse' ? this.sseLine(buf, s, e, at) : this.ndjsonLine(buf, s, e, at);
  }

  /** After the first content: SKIPPED for an event that may go unparsed (a JSON object by its
   *  first and last bytes, naming nothing that may end the stream or report an error); after the
   *  stream's end, while tokens are counted, USAGE_READ: what follows the end is the usage event
   *  (OpenAI's include_usage), its counts read from its bytes; null: the event is parsed. */
  private unparsed(buf: Buffer, s: number, e: number): string | null {
    const text = objectText(buf, s, e);
    if (text === null || this.shape.mayMatter.test(text)) return null;
    if (!this._complete || this.usage === null) return SKIPPED;
    this.reported = mergeReported(this.reported, this.usage.read(buf.subarray(s, e)));
    return USAGE_READ;
  }

  private ndjsonLine(buf: Buffer, s: number, e: number, at: number): Seen {
    if (s === e) return 'none';
    if (this.evStart === -1) this.open(at);
    if (e - s > MAX_EVENT_BYTES) return this.tooLong();
    const unparsed = this._hasContent ? this.unparsed(buf, s, e) : null;
    if (unparsed !== null) {
      this.evStart = -1;
      if (unparsed === SKIPPED) this.events++;
      return 'none';
    }
    const text = buf.toString('utf8', s, e);
    const r = this.event(text, '');
    this.evStart = -1;
    return r;
  }

  private sseLine(buf: Buffer, s: number, e: number, at: number): Seen {
    if (s === e) {
      // A blank line ends the event: one without data (comments only, a lone event name) is ignored.
      if (this.evData === null) {
        this.resetEvent();
        return 'none';
      }
      // Skipped lines left no text to join: such an event is routine by construction (content,
      // unless it was read for its usage only).
      const skipped = this.evData === SKIPPED || this.evMore?.includes(SKIPPED) === true;
      if (skipped || this.evData === USAGE_READ || this.evMore?.includes(USAGE_READ)) {
        this.resetEvent();
        if (skipped) this.events++;
        return 'none';
      }
      const data = this.evMore === null ? this.evData : this.evMore.join('\n');
      const r = this.event(data, this.evName);
      if (!this.stopped) this.resetEvent();
      return r;
    }
    if (this.evStart === -1) this.open(at);
    this.evBytes += e - s + 1;
    if (this.evBytes > MAX_EVENT_BYTES) return this.tooLong();
    if (buf[s] === COLON) return 'none'; // a comment: keep-alive
    let v = fieldValue(buf, s, e, 'data');
    if (v !== -1) {
      const plain = !this.shape.alwaysParsed.has(this.evName);
      const value = (this._hasContent && plain ? this.unparsed(buf, v, e) : null) ?? buf.toString('utf8', v, e);
      if (this.evData === null) this.evData = value;
      else (this.evMore ??= [this.evData]).push(value);
      return 'none';
    }
    v = fieldValue(buf, s, e, 'event');
    if (v !== -1) {
      this.evName = buf.toString('utf8', v, e);
      return 'none';
    }
    const errorField = this.shape.errorField;
    v = errorField === undefined ? -1 : fieldValue(buf, s, e, errorField);
    if (v !== -1) {
      // An error line of the API's own (llama.cpp's `error: {json}`, which may still be followed
      // by [DONE]): read as an event of that name with that data.
      this.evName = errorField!;
      const value = buf.toString('utf8', v, e);
      if (this.evData === null) this.evData = value;
      else (this.evMore ??= [this.evData]).push(value);
    }
    return 'none'; // id:, retry: and unknown fields do not matter here
  }

  /** Classify one event's data; record what it showed. */
  private event(data: string, name: string): Seen {
    // A JSON event starts with `{`: only other data is looked up (no hashing of every event).
    let kind = data.charCodeAt(0) === OPEN_BRACE ? undefined : this.shape.sentinels.get(data);
    let value: unknown = NOT_JSON;
    if (kind === undefined) {
      try {
        value = JSON.parse(data);
      } catch {
        if (this.format === 'ndjson' && data.trim() === '') return 'none'; // a line of spaces
      }
      if (value !== NOT_JSON) kind = this.shape.classify(value, name);
      else if (this.shape.errorEvents.has(name)) kind = 'error';
      else return this.bad('malformed', `malformed stream: an event's data is not JSON (${data.length} chars: ${JSON.stringify(clip(data, EXCERPT_CHARS))})`);
    }
    if (this.usage !== null && value !== NOT_JSON && this.usage.carries(value))
      this.reported = mergeReported(this.reported, this.usage.read(Buffer.from(data)));
    if (kind === 'error') return this.bad('error', clip(`backend error: ${(value !== NOT_JSON && this.shape.errorMessage(value)) || data}`, PROBLEM_CHARS));
    if (kind === 'none') return 'none';
    if (kind === 'terminator') {
      this._complete = true;
      const finish = this.usage !== null && value !== NOT_JSON ? this.usage.finish(value) : undefined;
      if (finish !== undefined) (this.reported ??= {}).finish = finish;
    } else this.events++;
    if (this._hasContent) return 'none';
    this._hasContent = true;
    return 'content';
  }
}
