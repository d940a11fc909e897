// The attempt loop's own record of a request (attempt-loop.ts), beyond what steps read of it
// (attempt-state.ts): how the candidates failed so far (what the error names when nothing answered:
// decisions.ts, exhaustedError), the backend answer held back as the best reply yet, and how the
// request ends when nothing answered — that held answer, the terminal step's own, the gateway's
// error, or, after a stream broke off, its in-stream error.
import type { Endpoint } from '../backends/endpoints.js';
import { ClientGone } from '../backends/failures.js';
import type { HeldReply } from './attempt.js';
import { AttemptState, type FailedAttempt } from './attempt-state.js';
import type { Continuations } from './continuation.js';
import { exhaustedError, type Exhaustion } from './decisions.js';
import type { Exchange, SendPolicy } from './exchange.js';
import type { Candidate } from './plan.js';
import { writeWhole } from './reply.js';

/** The answer the client gets if nothing better comes, with where it came from. */
export interface Held extends HeldReply {
  fallback: boolean;
  /** Its entry in the attempt record's `tried`. */
  entry: number;
}

/** A walk's failures before any (a continuation's walk starts afresh). */
export const freshExhaustion = (): Exhaustion => ({
  failed: 0,
  skipped: 0,
  testAt: Infinity,
  full: null,
  limited: null,
  last: undefined,
  budgetSpent: false,
  unreachable: null,
});

export abstract class AttemptRecord<C extends Exchange> extends AttemptState {
  /** How the candidates of this walk failed. */
  protected x = freshExhaustion();
  protected held: Held | null = null;
  /** How a stream that breaks after its content is continued (continuation.ts). */
  protected abstract readonly continuations: Continuations;

  constructor(
    protected readonly ex: C,
    protected readonly policy: SendPolicy<C>,
  ) {
    super();
  }

  /** No continuation came through: the client's stream ends with the break's in-stream error,
   *  the request's answer from the endpoint that broke. */
  protected endBroken(): true {
    const { ex } = this;
    const gone = ex.res.destroyed;
    const ep = this.continuations.end(gone);
    if (gone) ex.error = new ClientGone();
    else ex.log.warn({ req: ex.id, endpoint: ep.name, err: ex.error }, 'the reply broke off after it had started');
    return true;
  }

  /** Nothing answered: the answer held back, the step's own answer, or the error. */
  protected giveUp(): true {
    const { ex, held } = this;
    if (this.continuations.broken) return this.endBroken();
    if (held) {
      // Every attempt failed: the last backend answer held back is the most honest reply.
      if (!held.fallback) this.fellBack = null;
      this.tried![held.entry].answered = true;
      this.endpoint = held.endpoint;
      this.model = held.model;
      writeWhole(ex.res, ex.method, held.plan, held.status, held.headers, held.body);
      return true;
    }
    // The request ends with the last attempt's failure: that entry is the answer, not a retry.
    const last = this.tried?.[this.tried.length - 1];
    if (last && this.endpoint?.name === last.endpoint) last.answered = true;
    const err = exhaustedError(this.x, { provider: ex.family, model: ex.model }, this.count, this.policy.retry?.budgetMs ?? 0, Date.now());
    if (this.policy.unavailable && (err.key === 'ENDPOINT_UNAVAILABLE' || err.key === 'CIRCUIT_BREAKER')) {
      this.endpoint = null;
      return this.policy.unavailable(ex);
    }
    throw err;
  }

  /** A candidate passed over for its open breaker: counted, with when its next test goes. */
  protected skipped(ep: Endpoint): void {
    this.x.skipped++;
    this.x.testAt = Math.min(this.x.testAt, ep.breaker.nextTestAt);
  }

  protected clientGone(): true {
    // During a continuation: the answer is the broken stream's, as far as it went.
    if (this.continuations.broken) return this.endBroken();
    this.ex.error = new ClientGone();
    return true;
  }

  protected recordFailure(ep: Endpoint, outcome: string, clientError = false): void {
    const failed: FailedAttempt = { endpoint: ep.name, family: ep.family, model: this.model ?? this.ex.model, outcome, atMs: Math.round(this.ex.elapsedMs()) };
    if (clientError) failed.clientError = true;
    (this.tried ??= []).push(failed);
  }

  protected windowOf(c: Candidate): number {
    const name = c.model ?? this.ex.model;
    return (name && this.policy.retry?.contextWindow(c.endpoint, name)) || 0;
  }
}
