// A worker's rate-limit buckets, leased from its host (gw serve --workers N) so that most takes
// never leave the worker. The host's buckets are the only ones: a take the worker cannot answer
// from its lease asks the host, which takes one token from each bucket (all or none) and lends
// the worker a few more of each — at most LEASE_MAX, and at most the bucket's tokens left shared
// by twice the workers, so that near the limit nothing is lent and every request asks the host.
// Leased tokens are taken from the host's bucket: the host never lets through more than its
// buckets allow. What a worker holds unused for LEASE_MS goes back to the host; until then
// another worker's client may be refused while tokens sit here (bounded by the leases: a
// fraction of the tokens left, for at most LEASE_MS). A host that does not answer a take in
// time lets the request through (as a Redis store that cannot answer does), counted.
import type { SharedBuckets } from '../rate-buckets.js';
import type { SharedTake } from '../token-bucket.js';
import { reportOf, UNIT, type Take } from '../token-bucket.js';
import type { TakeAnswer } from './host-protocol.js';

export const LEASE_MAX = 64;
export const LEASE_MS = 1_000;
const TAKE_TIMEOUT_MS = 2_000;

interface Lease {
  tokens: number;
  until: number;
  /** The bucket as the host's take left it, less what was taken here since (for the headers). */
  report: Take;
}

export interface LeaseHost {
  take(takes: SharedTake[], timeoutMs: number): Promise<TakeAnswer | undefined>;
  giveBack(tokens: [scope: string, key: string, count: number][]): void;
  failed(): void;
}

export class LeasedBuckets implements SharedBuckets {
  private readonly leases = new Map<string, Lease>();
  private readonly sweeper: NodeJS.Timeout;

  /** `leaseMs`: how long a lease is kept unused (tests shorten or lengthen it). */
  constructor(
    private readonly host: LeaseHost,
    private readonly leaseMs = LEASE_MS,
  ) {
    this.sweeper = setInterval(() => this.sweep(performance.now()), leaseMs);
    this.sweeper.unref();
  }

  take(takes: readonly SharedTake[]): Promise<TakeAnswer> {
    const now = performance.now();
    const held: Lease[] = [];
    for (const t of takes) {
      const lease = this.leases.get(keyOf(t));
      if (!lease || lease.tokens < 1 || lease.until < now) return this.ask(takes, now);
      held.push(lease);
    }
    for (const lease of held) {
      lease.tokens--;
      lease.report = { ...lease.report, remaining: Math.max(0, lease.report.remaining - 1) };
    }
    return Promise.resolve({ takes: held.map((l) => l.report), refused: -1 });
  }

  private async ask(takes: readonly SharedTake[], now: number): Promise<TakeAnswer> {
    const answer = await this.host.take([...takes], TAKE_TIMEOUT_MS);
    if (!answer) {
      this.host.failed();
      const full = (t: SharedTake) => Math.max(1, t.rate.burst) * UNIT;
      return { takes: takes.map((t) => reportOf(full(t), full(t), t.rate.perMinute, true)), refused: -1 };
    }
    takes.forEach((t, i) => {
      const lent = answer.leased?.[i] ?? 0;
      if (lent <= 0) return;
      const key = keyOf(t);
      const lease = this.leases.get(key);
      // Tokens still held (a take that asked because another bucket ran out) stay held.
      const kept = lease && lease.until >= now ? lease.tokens : 0;
      if (lease && !kept && lease.tokens > 0) this.host.giveBack([[t.scope, t.key, lease.tokens]]);
      this.leases.set(key, { tokens: kept + lent, until: now + this.leaseMs, report: answer.takes[i] });
    });
    return answer;
  }

  /** Leases not renewed for LEASE_MS go back to the host. */
  private sweep(now: number): void {
    const back: [string, string, number][] = [];
    for (const [key, lease] of this.leases) {
      if (lease.until >= now) continue;
      this.leases.delete(key);
      if (lease.tokens > 0) {
        const at = key.indexOf('\u0000');
        back.push([key.slice(0, at), key.slice(at + 1), lease.tokens]);
      }
    }
    if (back.length) this.host.giveBack(back);
  }

  /** The worker stops: every lease goes back. */
  close(): void {
    clearInterval(this.sweeper);
    this.sweep(Infinity);
  }
}

const keyOf = (t: SharedTake) => `${t.scope}\u0000${t.key}`;
