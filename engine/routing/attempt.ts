// One attempt, between the attempt loop and the relay that brings its reply to the client: what
// the loop tells it (AttemptControl) and how it ends (Outcome, and the failures the loop reads).
import type { Endpoint } from '../backends/endpoints.js';
import type { ReplyHeaders } from '../core/json.js';
import type { Splice } from './continuation.js';
import type { ReplyPlan } from './reply.js';
import type { StreamFormat, StreamShape } from './stream-watch.js';
import type { UsageShape } from './usage.js';

/** The failures the relay holds a reply back for, to give the request to another attempt. */
export type RetryableKind = 'status' | 'stream' | 'first_token';

/** A whole backend answer held back while another candidate was tried. */
export interface HeldReply {
  status: number;
  headers: ReplyHeaders;
  body: Buffer;
  /** How it is shaped if it becomes the answer: decided when it arrived, by its own attempt. */
  plan: ReplyPlan;
  endpoint: Endpoint;
  model: string | undefined;
}

/** An attempt that failed in a way another candidate may fix: a held status, a stream that
 *  failed before its first content, a first-token deadline, an endpoint found down under it. `outcome`: in words, for the log. */
export class AttemptFailed extends Error {
  constructor(
    readonly outcome: string,
    readonly kind: 'status' | 'stream' | 'first_token' | 'context_length' | 'client_error' | 'abandoned',
    readonly held: HeldReply | null = null,
  ) {
    super(`attempt failed: ${outcome}`);
  }
}

/** The request's overall budget (proxy.retry.budget) ran out before its reply started. */
export class BudgetSpent extends Error {
  constructor() {
    super('the request budget ran out');
  }
}

/** What the attempt loop tells one attempt. */
export interface AttemptControl {
  /** Were this attempt to fail so now, could another follow (plan, attempts, budget, fleet)? */
  canRetry(kind: RetryableKind): boolean;
  /** Were this attempt given up now (its endpoint found down), would another candidate take the
   *  request (replay-safe, attempts and budget left, one waiting; `fleet`: and the fleet's retry
   *  budget has room, nothing taken)? */
  mayMoveOn(fleet?: boolean): boolean;
  /** A failure another attempt might have fixed is passed on as it is (counted when the fleet
   *  retry budget is what stopped the retry). */
  passedOn(): void;
  /** A later candidate has a larger context window: a context-length error is worth holding. */
  readonly contextFallback: boolean;
  /** A client error is a failure too (a fallback model rejected what the primary accepted). */
  readonly clientErrorsFail: boolean;
  /** Milliseconds to the first content of a stream before the attempt is abandoned; 0: none. */
  readonly firstTokenMs: number;
  /** The same, learned from the endpoint's recent streams (first-token-watch.ts: looked at a few
   *  times a second), when no deadline is set; 0: none. */
  readonly learnedFirstTokenMs: number;
  /** Does the request ask for a streamed reply? (Asked when a learned deadline is due before any
   *  reply head: the body is read for it then, not for every request.) */
  streamingRequest(): boolean;
  /** How this attempt's streams read; null: a streamed reply is piped unwatched (a model pull's
   *  progress, a step that speaks no inference API). */
  readonly streams: StreamShape | null;
  /** Reads a context-length error in a held client error; null: none is looked for. */
  readonly contextLengthError: ((text: string) => boolean) | null;
  /** Where this attempt's reply reports the tokens used, while they are counted; null: not counted. */
  readonly usageFields: UsageShape | null;
  /** Bytes of the request body this attempt sent (the input estimate when none is reported). */
  readonly sentBytes: number;
  /** performance.now() at which the request's budget ends. */
  readonly budgetEnds: number;
  /** The model this attempt asks for (a held answer keeps it). */
  readonly model: string | undefined;
  /** This attempt continues a stream that broke: no head of its own, its events spliced into
   *  the client's stream; null: an attempt like any other. */
  readonly splice: Splice | null;
  /** What keeps the answer this stream relays, so a break can be continued; null: a break of
   *  this attempt is not continued. */
  readonly answer: AnswerKeeper | null;
}

/** Keeps a stream's answer for a continuation (continuation.ts, Continuations). */
export interface AnswerKeeper {
  /** Whole events the client's stream received, as the backend's API has them. */
  relayed(format: StreamFormat, bytes: Buffer): void;
  /** Were the stream to break now, after its content reached the client, could another
   *  candidate continue it (settings, budget, what the answer holds, who is left)? Asked at a
   *  break: what it finds is the request's record. */
  mayContinue(): boolean;
  /** The same, asked of a stream that has not broken: nothing recorded. */
  couldContinue(): boolean;
}

/** How one attempt ended: relayed (fully or cut after the first byte), or failed before any
 *  byte reached the client — `sent` when undici had started the request on a connected socket,
 *  `answered` when the backend's reply head had arrived. */
export type Outcome = { relayed: true } | { relayed: false; error: Error; sent: boolean; answered: boolean } | Broken;

/** A stream that broke after its content reached the client, left open for a continuation:
 *  the reply as the client has it, and how it ends if nothing continues it. */
export interface Broken {
  relayed: 'broken';
  reason: string;
  format: StreamFormat;
  plan: ReplyPlan;
  headers: ReplyHeaders;
  endHonestly(): void;
}
export const RELAYED: Outcome = { relayed: true };
