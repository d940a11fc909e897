// Finishing a stream elsewhere. A stream that breaks after its content reached the client (a
// reset, a stall past stream_idle_timeout, a malformed event, an error event, an end without its
// terminator) cannot become an error status, and bytes sent cannot be taken back; but the answer
// so far is known — the relay sends whole events only and keeps what it sent. The attempt loop
// then asks the next candidate (the same model on another endpoint first, then the fallback
// chain) to continue that exact answer, and the continuation's events join the client's stream
// as if nothing had happened (its opening events dropped, ids and indexes as the client saw
// them). What an answer holds and how a continuation is asked for and spliced is the API's: the
// terminal step hands in a ContinuationApi (plugins/apis/continuation/). When nothing can
// continue it, the stream ends with the honest in-stream error, as any broken stream does.
import type { Logger } from 'pino';
import type { Endpoint } from '../backends/endpoints.js';
import type { ReplyHeaders } from '../core/json.js';
import type { AnswerKeeper, Broken } from './attempt.js';
import type { AttemptState } from './attempt-state.js';
import type { Candidate } from './plan.js';
import type { ReplyPlan } from './reply.js';
import { EventSplitter, frame, type StreamEvent } from './stream-events.js';
import type { StreamFormat } from './stream-watch.js';

/** What the answer relayed so far holds, read event by event (in the API's own terms). */
export interface Transcript {
  /** One complete event the client received, in order. */
  read(ev: StreamEvent): void;
  /** Why this answer cannot be continued (it broke inside a tool call, in its reasoning…), or null. */
  blocker(): string | null;
  /** Characters of answer text so far (the log). */
  readonly chars: number;
  /** For one continuation attempt: what the client must see of each of its events ([]:
   *  nothing). `restart`: the attempt asks for the answer again from its start (its engine
   *  refuses a prefill): null once it differs from what the client has. */
  splicer(restart?: boolean): (ev: StreamEvent) => StreamEvent[] | null;
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
  /** This attempt's first content joined the client's stream; or, after it did, it broke in
   *  turn and ends the stream unfinished. */
  readonly joined: () => void;
  readonly unfinished: () => void;
  /** The events of this attempt as the client must see them; null: it cannot join (a restart
   *  that differs from what the client has). */
  readonly transform: (ev: StreamEvent) => StreamEvent[] | null;
  /** The answer is asked for again from its start, without a prefill. */
  readonly restart: boolean;
  /** End the client's stream with the in-stream error of the break that started it all. */
  readonly endHonestly: () => void;
}

/** Folded into the transcript once this much is kept: memory stays bounded by the text, and a
 *  stream shorter than this (some thousands of tokens) is never parsed unless it breaks. */
const FOLD_BYTES = 1024 * 1024;

/** The answer so far: the bytes relayed (whole events), copied into one buffer that grows (the
 *  chunks themselves are not held: kept alive, each would cost the collector), read into the
 *  transcript only when needed (a break, or too much kept): a stream that never breaks is never
 *  parsed here. */
export class AnswerSoFar {
  private kept: Buffer | null = null;
  private keptBytes = 0;
  private format: StreamFormat = 'sse';
  private splitter: EventSplitter | null = null;
  private read: Transcript | null = null;
  /** An event the API's reader could not take: the answer cannot be continued. */
  problem: string | null = null;

  constructor(private readonly api: ContinuationApi) {}

  add(format: StreamFormat, bytes: Buffer): void {
    this.format = format;
    const need = this.keptBytes + bytes.length;
    if (this.kept === null || need > this.kept.length) {
      // Small ones come from Node's buffer pool; TypedArray set is a plain copy (Buffer.copy makes a view).
      const grown = Buffer.allocUnsafe(Math.max(need, Math.min(FOLD_BYTES, (this.kept?.length ?? 1024) * 2)));
      if (this.kept) grown.set(this.kept.subarray(0, this.keptBytes));
      this.kept = grown;
    }
    this.kept.set(bytes, this.keptBytes);
    this.keptBytes = need;
    if (this.keptBytes > FOLD_BYTES) this.fold();
  }

  /** Everything kept, read into the transcript. */
  fold(): Transcript {
    const t = (this.read ??= this.api.transcript());
    if (this.kept !== null && this.keptBytes > 0) {
      const splitter = (this.splitter ??= new EventSplitter(this.format));
      try {
        for (const ev of splitter.feed(this.kept.subarray(0, this.keptBytes))) t.read(ev);
      } catch (err) {
        this.problem ??= `an event of it could not be read (${(err as Error).message})`;
      }
      this.keptBytes = 0;
    }
    return t;
  }
}

/** The candidates a stream that broke on candidate `broken` may be continued on, as indexes in
 *  order: the same model on the other endpoints (plan order), then — unless sameModelOnly — the
 *  candidates after it serving another model (the fallback chain). Never the endpoint that broke,
 *  but for a hosted service another model of it, last (a service serves its models apart). */
export function continuationOrder(candidates: readonly Candidate[], broken: number, sameModelOnly: boolean): number[] {
  const b = candidates[broken];
  const same: number[] = [];
  const later: number[] = [];
  const hosted: number[] = [];
  const service = b.endpoint.profile.characteristics.hosted_service;
  candidates.forEach((c, i) => {
    if (c.endpoint === b.endpoint) {
      if (service && !sameModelOnly && i > broken && c.model !== b.model) hosted.push(i);
      return;
    }
    if (c.model === b.model) same.push(i);
    else if (!sameModelOnly && i > broken) later.push(i);
  });
  return [...same, ...later, ...hosted];
}

/** What a request's continuations need to know of its attempt loop. */
export interface ContinuationHost {
  /** The candidates walked now, and the index among them of the attempt under way. */
  readonly candidates: readonly Candidate[];
  readonly current: number;
  /** Could a continuation start now (a replay-safe route, budget left, the client there)? */
  continuationAllowed(): boolean;
  /** The API a stream of this request is continued in on that endpoint; null: not there. */
  continuationApi(ep: Endpoint): ContinuationApi | null;
}

/** One request's continuations, kept by its attempt loop: the API its streams speak, the answer
 *  relayed so far, the break being continued. What happened goes into the attempt record
 *  (continued, continuation) for the log and the metrics. */
export class Continuations implements AnswerKeeper {
  /** The API of the attempt under way; after a break, the break's. */
  private api: ContinuationApi | null = null;
  private answer: AnswerSoFar | null = null;
  /** The break being continued, and where it is among the failed attempts. */
  broken: Broken | null = null;
  private brokenAt: { entry: number; endpoint: Endpoint; model: string | undefined } | null = null;
  /** The candidates that may continue a break now (found by mayContinue). */
  private next: Candidate[] = [];
  /** Could another candidate continue the attempt under way? Asked at its first bytes. */
  private worthKeeping: boolean | undefined;

  constructor(
    private readonly host: ContinuationHost,
    private readonly rec: AttemptState,
    private readonly log: Logger,
    private readonly req: string,
  ) {}

  /** Before an attempt on ep: whether it keeps what it relays (the API its stream would be
   *  continued in is asked while no break is being continued). */
  prepare(ep: Endpoint, streams: boolean): AnswerKeeper | null {
    const s = ep.failover.continuation;
    if (!this.broken) this.api = streams && s.enabled && s.max > 0 ? this.host.continuationApi(ep) : null;
    this.worthKeeping = undefined;
    return this.api !== null && this.rec.continued < s.max ? this : null;
  }

  /** Keeps what a stream relays — unless no other candidate could continue it (a single
   *  endpoint, say): asked once per attempt, at its first bytes. */
  relayed(format: StreamFormat, bytes: Buffer): void {
    if (!(this.worthKeeping ??= this.continuers().length > 0)) return;
    (this.answer ??= new AnswerSoFar(this.api!)).add(format, bytes);
  }

  /** A stream broke after its content: may another candidate continue it? */
  mayContinue(): boolean {
    const ep = this.host.candidates[this.host.current].endpoint;
    const s = ep.failover.continuation;
    if (!this.host.continuationAllowed() || !this.api || !this.answer || this.rec.continued >= s.max) {
      // A continuation that broke in turn, with none left to it: the answer stays unfinished.
      if (this.broken) this.rec.continuation = 'failed';
      return false;
    }
    const blocker = this.answer.fold().blocker() ?? this.answer.problem;
    if (blocker !== null) {
      this.rec.continuation = 'not_continuable';
      this.log.warn({ req: this.req, endpoint: ep.name }, `the stream broke and cannot be continued: ${blocker}`);
      return false;
    }
    this.next = this.continuers();
    if (this.next.length > 0) return true;
    this.rec.continuation = 'failed';
    this.log.warn({ req: this.req, endpoint: ep.name }, 'the stream broke after its content; no other candidate can continue it');
    return false;
  }

  /** Could a break now be continued? Asked of a stream that has not broken (its endpoint was
   *  found down): nothing is recorded or logged. */
  couldContinue(): boolean {
    const s = this.host.candidates[this.host.current].endpoint.failover.continuation;
    if (!this.host.continuationAllowed() || !this.api || !this.answer || this.rec.continued >= s.max) return false;
    return (this.answer.fold().blocker() ?? this.answer.problem) === null && this.continuers().length > 0;
  }

  /** The candidates that may continue a break of the attempt under way, in order: those whose
   *  route speaks the same API (continuationOrder). */
  private continuers(): Candidate[] {
    const { candidates, current } = this.host;
    const order = continuationOrder(candidates, current, candidates[current].endpoint.failover.continuation.sameModelOnly);
    return order.map((i) => candidates[i]).filter((k) => !k.endpoint.retired && this.host.continuationApi(k.endpoint) === this.api);
  }

  /** The break on candidate c is continued: returns the candidates to walk. `entry`: its place
   *  among the failed attempts. */
  begin(c: Candidate, broken: Broken, entry: number): Candidate[] {
    this.log.warn(
      { req: this.req, endpoint: c.endpoint.name, reason: broken.reason, chars: this.answer!.fold().chars, next: this.next.map((k) => k.endpoint.name) },
      'the stream broke after its content; continuing it on the next candidate',
    );
    this.broken = broken;
    this.brokenAt = { entry, endpoint: c.endpoint, model: c.model };
    this.rec.continued++;
    // Until this continuation joins, the answer is unfinished.
    this.rec.continuation = null;
    return this.next;
  }

  /** What an endpoint that refused a prefill is known by: the API a continuation speaks and the
   *  model (a completion's prefill is its prompt, never refused as a chat's may be). */
  private refusalKey(model: string | undefined): string {
    return `${this.api?.name ?? ''} ${model ?? ''}`;
  }

  /** The endpoint refused this break's prefill for the model: remembered (bounded, the oldest
   *  forgotten first), so that it is asked for the answer again from its start. */
  refusedPrefill(ep: Endpoint, model: string | undefined): void {
    const refused = ep.prefillRefused;
    if (refused.size >= 256) refused.delete(refused.values().next().value as string);
    refused.add(this.refusalKey(model));
  }

  /** Is a break continued on `ep` by asking for the answer again from its start (it refused a
   *  prefill of the model before)? */
  restartsOn(ep: Endpoint, model: string | undefined): boolean {
    return ep.prefillRefused.has(this.refusalKey(model));
  }

  /** What the answer holds so far. */
  get transcript(): Transcript {
    return this.answer!.fold();
  }

  /** The splice of the next continuation attempt (`restart`: see Splice). */
  splice(restart: boolean): Splice {
    const b = this.broken!;
    return {
      format: b.format,
      plan: b.plan,
      headers: b.headers,
      reason: b.reason,
      restart,
      transform: this.transcript.splicer(restart),
      endHonestly: b.endHonestly,
      joined: () => this.outcome('continued'),
      unfinished: () => this.outcome('failed'),
    };
  }

  /** How a continuation came out: it joined the client's stream, or broke in turn unfinished. */
  private outcome(o: 'continued' | 'failed'): void {
    this.rec.continuation = o;
  }

  /** The request cannot be continued as it is (the route's API said why). */
  refused(why: string): void {
    this.rec.continuation = 'not_continuable';
    this.log.warn({ req: this.req }, `the stream broke and cannot be continued: ${why}`);
  }

  /** None came through: the stream ends with the break's in-stream error (unless its client
   *  left), the request's answer from the endpoint that broke, which is returned. */
  end(clientGone: boolean): Endpoint {
    const rec = this.rec;
    rec.continuation ??= 'failed';
    const b = this.brokenAt!;
    rec.endpoint = b.endpoint;
    rec.model = b.model;
    rec.tried![b.entry].answered = true;
    if (!clientGone) this.broken!.endHonestly();
    return b.endpoint;
  }
}

/** A continuation's bytes on their way into the client's stream (whole events): its events as
 *  the client must see them, in the stream's framing. Where they join a stream relayed as it
 *  came (SSE), a comment says so first; clients skip comments. */
export class SpliceOut {
  private readonly events: EventSplitter;
  private marked: boolean;
  /** Something of it reached the client's stream (the splice was told it joined). */
  joined = false;
  /** A restart that differs from what the client has: nothing more of it goes out. */
  differs = false;

  constructor(
    private readonly splice: Splice,
    private readonly endpoint: string,
    relayedAsItCame: boolean,
  ) {
    this.events = new EventSplitter(splice.format);
    this.marked = !relayedAsItCame || splice.format !== 'sse';
  }

  /** What the client gets for these bytes ('' : nothing). */
  feed(bytes: Buffer): string {
    return this.out(this.events.feed(bytes));
  }

  /** The stream ended: a last event without its end. */
  end(): string {
    return this.out(this.events.end());
  }

  private out(events: StreamEvent[]): string {
    let out = '';
    for (const ev of events) {
      const shown = this.differs ? null : this.splice.transform(ev);
      if (shown === null) {
        this.differs = true;
        return '';
      }
      for (const e of shown) out += frame(this.splice.format, e);
    }
    if (out !== '' && !this.joined) {
      this.joined = true;
      this.splice.joined();
    }
    if (out === '' || this.marked) return out;
    this.marked = true;
    return `: gw continued this answer on endpoint ${this.endpoint}; the stream before broke: ${this.splice.reason.replace(/[\r\n]+/g, ' ')}\n\n${out}`;
  }
}
