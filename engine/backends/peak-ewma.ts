// An endpoint's recent latency as a peak-sensitive moving average (Finagle's and Linkerd's
// "peak EWMA"): a slower sample than the average replaces it at once, faster ones pull it down
// gradually, and it decays while the endpoint is quiet — a backend that turns slow is avoided
// from its first slow reply, and one that was slow gets traffic again once time has passed.
// The sample is the time to the first byte of the reply body (an engine's first token when it
// streams; the whole reply otherwise): the reply head alone says little, as several engines send
// it before any work is done.

/** How fast the average forgets, in milliseconds (Finagle's default decay time). */
export const DECAY_MS = 10_000;

export class PeakEwma {
  /** Milliseconds; 0 until the first sample. */
  private cost = 0;
  private stamp = 0;
  samples = 0;

  record(ms: number, now = performance.now()): void {
    this.samples++;
    if (ms > this.cost) this.cost = ms;
    else {
      const w = Math.exp(-Math.max(now - this.stamp, 0) / DECAY_MS);
      this.cost = this.cost * w + ms * (1 - w);
    }
    this.stamp = now;
  }

  /** The average as of its last sample (what status shows: it changes only with traffic). */
  get atLastSample(): number {
    return this.cost;
  }

  /** The average now (decayed for the time since its last sample); 0 before any sample. */
  value(now = performance.now()): number {
    if (this.cost === 0) return 0;
    return this.cost * Math.exp(-Math.max(now - this.stamp, 0) / DECAY_MS);
  }
}
