// The radixengine fake's "prefix cache": the prompts seen lately, so a repeated prompt is a hit.
// Bounded (least recently used out first), so a long `gw demo` run does not grow without end.

export class PromptCache {
  private readonly keys = new Set<string>();

  constructor(readonly limit = 1000) {}

  get size(): number {
    return this.keys.size;
  }

  /** Whether `key` was seen lately; it is remembered as the most recent either way. */
  seen(key: string): boolean {
    const hit = this.keys.delete(key);
    this.keys.add(key);
    if (this.keys.size > this.limit) this.keys.delete(this.keys.values().next().value as string);
    return hit;
  }

  clear(): void {
    this.keys.clear();
  }
}
