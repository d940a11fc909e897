// The fleet's retry budget (Finagle's RetryBudget, Envoy's retry_budget): every request sent
// upstream deposits `ratio` of a retry, every retry withdraws one, over a sliding window of
// one-second slots, plus `min_per_second` retries that are always allowed. A fleet that fails
// everything then gets at most that share of extra load instead of max_retries times its traffic.
// Counted per second with integers (deposits in thousandths): no allocation per request.

export interface RetryBudgetSettings {
  ratio: number;
  minPerSecond: number;
  windowMs: number;
}

const SLOT_MS = 1000;
const MILLI = 1000;

export class RetryBudget {
  private slots: Int32Array = new Int32Array(1);
  /** Per slot: requests deposited (thousandths of a retry each) minus retries taken (MILLI each). */
  private settings!: RetryBudgetSettings;
  private current = 0;
  private currentSlot = 0;
  /** Retries not made because the budget was spent, since start (for the metrics; the attempt
   *  loop counts the failures it passed on for that reason too). */
  exhausted = 0;
  /** Retries taken since start. */
  taken = 0;

  constructor(
    settings: RetryBudgetSettings,
    private readonly now: () => number = () => performance.now(),
  ) {
    this.configure(settings);
  }

  configure(settings: RetryBudgetSettings): void {
    this.settings = settings;
    const n = Math.max(1, Math.ceil(settings.windowMs / SLOT_MS));
    if (n !== this.slots.length) {
      this.slots = new Int32Array(n);
      this.current = 0;
    }
  }

  /** Move the window to now, clearing the slots that fell out of it. */
  private advance(): void {
    const slot = Math.floor(this.now() / SLOT_MS);
    const gap = slot - this.currentSlot;
    if (gap <= 0) return;
    const n = this.slots.length;
    for (let i = 1; i <= Math.min(gap, n); i++) this.slots[(this.current + i) % n] = 0;
    this.current = (this.current + gap) % n;
    this.currentSlot = slot;
  }

  /** A request was sent upstream (its first attempt). */
  deposit(): void {
    this.advance();
    this.slots[this.current] += Math.round(this.settings.ratio * MILLI);
  }

  /** The balance in thousandths of a retry: deposits and the floor, less retries taken. */
  private balance(): number {
    let sum = 0;
    for (let i = 0; i < this.slots.length; i++) sum += this.slots[i];
    return sum + Math.round(this.settings.minPerSecond * ((this.slots.length * SLOT_MS) / 1000) * MILLI);
  }

  /** Would a retry be allowed now? (Nothing taken.) */
  canRetry(): boolean {
    this.advance();
    return this.balance() >= MILLI;
  }

  /** Take one retry; false (counted as exhausted) when the budget has none. */
  tryRetry(): boolean {
    this.advance();
    if (this.balance() < MILLI) {
      this.exhausted++;
      return false;
    }
    this.slots[this.current] -= MILLI;
    this.taken++;
    return true;
  }
}
