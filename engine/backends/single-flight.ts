// One run per key at a time: a second call while one is under way joins it (health checks and
// discovery never pile up on an endpoint).
export class SingleFlight<K, V> {
  private readonly running = new Map<K, Promise<V>>();

  run(key: K, fn: () => Promise<V>): Promise<V> {
    let p = this.running.get(key);
    if (!p) {
      p = fn().finally(() => this.running.delete(key));
      this.running.set(key, p);
    }
    return p;
  }

  /** Settles when every run under way has. */
  async drain(): Promise<void> {
    await Promise.allSettled(this.running.values());
  }
}
