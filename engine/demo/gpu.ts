// A fake engine's one GPU that holds only a few models at once (FakeOptions.modelsAtOnce), as
// llama-server's router, llama-swap and Ollama do: requests are served in arrival order — one for
// a held model goes at once unless a switch is waiting ahead of it; one for another model waits
// its turn, then for the requests in flight for the model it evicts (least recently used), then
// for the load itself (switchMs). Switches are counted, as a bench compares them.

export class OneGpu {
  /** Models held, least recently used first. */
  readonly held: string[] = [];
  /** Loads made (each one a model switched in, beside or in place of another). */
  switches = 0;
  /** The model being loaded now, if any (reported as loading). */
  loading: string | null = null;
  private readonly inFlight = new Map<string, number>();
  private readonly idle = new Map<string, (() => void)[]>();
  /** Switches take turns, and requests behind a switch wait for it. */
  private turn: Promise<void> = Promise.resolve();
  private queued = 0;

  constructor(
    readonly modelsAtOnce: number,
    public switchMs: number,
  ) {}

  /** The request for `model` may run once this resolves; it calls release(model) when done. */
  async acquire(model: string): Promise<void> {
    if (this.held.includes(model) && this.queued === 0) return this.use(model);
    const before = this.turn;
    let done!: () => void;
    this.turn = new Promise((r) => (done = r));
    this.queued++;
    await before;
    try {
      if (!this.held.includes(model)) {
        if (this.held.length >= this.modelsAtOnce) {
          const evict = this.held[0];
          await this.drained(evict);
          this.held.splice(this.held.indexOf(evict), 1);
        }
        this.loading = model;
        await new Promise((r) => setTimeout(r, this.switchMs).unref());
        this.loading = null;
        this.held.push(model);
        this.switches++;
      }
      this.use(model);
    } finally {
      this.queued--;
      done();
    }
  }

  release(model: string): void {
    const n = (this.inFlight.get(model) ?? 1) - 1;
    if (n > 0) return void this.inFlight.set(model, n);
    this.inFlight.delete(model);
    for (const wake of this.idle.get(model) ?? []) wake();
    this.idle.delete(model);
  }

  reset(): void {
    this.switches = 0;
  }

  private use(model: string): void {
    this.inFlight.set(model, (this.inFlight.get(model) ?? 0) + 1);
    const at = this.held.indexOf(model);
    if (at >= 0) this.held.push(...this.held.splice(at, 1));
  }

  private drained(model: string): Promise<void> {
    if (!this.inFlight.has(model)) return Promise.resolve();
    return new Promise((wake) => {
      const list = this.idle.get(model);
      if (list) list.push(wake);
      else this.idle.set(model, [wake]);
    });
  }
}
