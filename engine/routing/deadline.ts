// One timer for an attempt's next deadline (its first content, the request's budget): set again
// as the attempt moves on, cleared when it settles. What its callback throws never escapes the
// timer (a throw there would end the process): it goes to `failed`.
export class Deadline {
  private timer: NodeJS.Timeout | null = null;
  /** What it was set for (performance.now() time): a timer may fire a fraction of a millisecond early. */
  at = 0;

  constructor(private readonly due: () => void, private readonly failed: (err: unknown) => void) {}

  get armed(): boolean {
    return this.timer !== null;
  }

  set(at: number): void {
    this.clear();
    this.at = at;
    this.timer = setTimeout(() => {
      this.timer = null;
      try {
        this.due();
      } catch (err) {
        this.failed(err);
      }
    }, Math.max(0, at - performance.now()));
  }

  clear(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }
}
