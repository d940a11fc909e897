// The process's live-object count for /internal/process (memory.heap_objects). Counting needs a
// full, stop-the-world garbage collection (about 1 s per 100 MB of heap), so the count is taken
// only when asked for, at most once per HEAP_COUNT_MAX_AGE_MS however often it is asked (a
// client cannot stall the gateway by asking in a loop), and every reply reports the last count
// with its age: 0 with no age until someone first asks.

export const HEAP_COUNT_MAX_AGE_MS = 60_000;

export interface HeapObjects {
  /** The last count; 0 when none was taken yet. */
  count: number;
  /** Whole seconds since that count; null when none was taken yet. */
  ageSeconds: number | null;
}

export class HeapObjectCount {
  private count = 0;
  private countedAt: number | null = null;

  constructor(
    private readonly take: () => number,
    private readonly now: () => number = Date.now,
    private readonly maxAgeMs = HEAP_COUNT_MAX_AGE_MS,
  ) {}

  /** The last count; with `count`, a new one first when there is none or it is older than the limit. */
  read(count: boolean): HeapObjects {
    if (count && (this.countedAt === null || this.now() - this.countedAt >= this.maxAgeMs)) {
      this.count = this.take();
      this.countedAt = this.now();
    }
    // Read after counting: a count that took a while is not reported from the future.
    return { count: this.count, ageSeconds: this.countedAt === null ? null : Math.floor((this.now() - this.countedAt) / 1000) };
  }
}
