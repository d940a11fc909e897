// Where the usage ledger (usage-ledger.ts) is asked: this process's, answered at once (a gateway
// of one process, or the host of workers), or the host's, a round trip away (a worker: its
// WorkerLink). Chosen once, by the host scope (sharing/host.ts).
import type { Admission, Budget, KeyReport, Spent, UsageLedger } from './usage-ledger.js';

export interface UsageBooks {
  /** Answered at once (admit returns its admission, not a promise). */
  readonly local: boolean;
  /** Reserve `tokens` against the budget's limits, all or none. */
  admit(budget: Budget, tokens: number): Admission | Promise<Admission>;
  /** The request is over: its reservation (0: none) settles on what it used (null: nothing). */
  settle(id: number, spent: Spent | null): void;
  /** Per key, its counters and what is left of its limits (`budgets`: the keys' limits). */
  report(budgets: readonly Budget[], only?: string): Promise<Record<string, KeyReport>>;
}

export class LocalBooks implements UsageBooks {
  readonly local = true;

  constructor(readonly ledger: UsageLedger) {}

  admit(budget: Budget, tokens: number): Admission {
    return this.ledger.admit(budget, tokens);
  }

  settle(id: number, spent: Spent | null): void {
    this.ledger.settle(id, spent);
  }

  report(budgets: readonly Budget[], only?: string): Promise<Record<string, KeyReport>> {
    return Promise.resolve(this.ledger.report(new Map(budgets.map((b) => [b.key, b])), only));
  }
}
