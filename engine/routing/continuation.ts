// Finishing a stream elsewhere. A stream that breaks after its content reached the client (a
// reset, a stall past stream_idle_timeout, a malformed event, an error event, an end without its
// terminator) cannot become an error status, and bytes sent cannot be taken back; but the answer
// so far is known — the relay sends whole events only and keeps what it sent. The attempt loop
// then asks the next candidate (the same model on another endpoint first, then the fallback
// chain) to continue that exact answer, and the continuation's events join the client's stream
// as if nothing had happened (its opening events dropped, ids and indexes as the client saw
// them). What an answer holds and how a continuation is asked for and spliced is the API's: the
// terminal step hands in a ContinuationApi (plugins/lib/continuation/). When nothing can
// continue it, the stream ends with the honest in-stream error, as any broken stream does.
import type { Candidate } from './plan.js';
import type { ReplyPlan } from './reply.js';
import type { ReplyHeaders } from '../core/json.js';
import { EventSplitter, type StreamEvent } from './stream-events.js';
import type { StreamFormat } from './stream-watch.js';

/** What the answer relayed so far holds, read event by event (in the API's own terms). */
export interface Transcript {
  /** One complete event the client received, in order. */
  read(ev: StreamEvent): void;
  /** Why this answer cannot be continued (it broke inside a tool call, in its reasoning…), or null. */
  blocker(): string | null;
  /** Characters of answer text so far (the log). */
  readonly chars: number;
  /** For one continuation attempt: what the client must see of each of its events ([]: nothing). */
  splicer(): (ev: StreamEvent) => StreamEvent[];
}

/** How one API's streams are continued: a shared object per API (its identity says which). */
export interface ContinuationApi {
  readonly name: string;
  transcript(): Transcript;
}

/** A continuation under way: the broken stream's reply as the client has it, and how it ends if
 *  nothing continues it. */
export interface Splice {
  readonly format: StreamFormat;
  readonly plan: ReplyPlan;
  readonly headers: ReplyHeaders;
  /** Why the stream broke (said in an SSE comment where the continuation joins it). */
  readonly reason: string;
  /** The events of this attempt as the client must see them. */
  readonly transform: (ev: StreamEvent) => StreamEvent[];
  /** End the client's stream with the in-stream error of the break that started it all. */
  readonly endHonestly: () => void;
}

/** Folded into the transcript once this much is kept: memory stays bounded by the text. */
const FOLD_BYTES = 256 * 1024;

/** The answer so far: the bytes relayed (whole events), read into the transcript when needed. */
export class AnswerSoFar {
  readonly transcript: Transcript;
  private kept: Buffer[] = [];
  private keptBytes = 0;
  private splitter: EventSplitter | null = null;

  constructor(readonly api: ContinuationApi) {
    this.transcript = api.transcript();
  }

  add(format: StreamFormat, bytes: Buffer): void {
    this.splitter ??= new EventSplitter(format);
    this.kept.push(bytes);
    this.keptBytes += bytes.length;
    if (this.keptBytes > FOLD_BYTES) this.fold();
  }

  /** Everything kept, read into the transcript. */
  fold(): Transcript {
    if (this.splitter && this.kept.length > 0) {
      for (const ev of this.splitter.feed(Buffer.concat(this.kept, this.keptBytes))) this.transcript.read(ev);
      this.kept = [];
      this.keptBytes = 0;
    }
    return this.transcript;
  }
}

/** The candidates a stream that broke on candidate `broken` may be continued on, as indexes in
 *  order: the same model on the other endpoints (plan order), then — unless sameModelOnly — the
 *  candidates after it serving another model (the fallback chain). Never the endpoint that broke. */
export function continuationOrder(candidates: readonly Candidate[], broken: number, sameModelOnly: boolean): number[] {
  const b = candidates[broken];
  const same: number[] = [];
  const later: number[] = [];
  candidates.forEach((c, i) => {
    if (c.endpoint === b.endpoint) return;
    if (c.model === b.model) same.push(i);
    else if (!sameModelOnly && i > broken) later.push(i);
  });
  return [...same, ...later];
}
