// Where conversations live away from their hash home (conversation affinity, plugins/routing/
// affinity.ts): an opening turn sent to a less-loaded endpoint than its home, a turn the load
// bound moved on. Their next turns go where their prompt cache now is, not back to the home
// where it is not. Only placements that differ from the home are kept, the most recent MAX of
// them. Host-wide: a worker's placements reach its host's other workers (sharing/host.ts,
// placed), so whichever worker takes a conversation's next turn finds it. Replicas do not share
// them: another replica's turn falls back to the hash.
import type { Endpoint } from './endpoints.js';

const MAX = 16_384;

export class Placements {
  /** 53 bits of a conversation's key → where it was placed. */
  private readonly map = new Map<number, Endpoint>();
  /** Told of each placement made here, and of one forgotten (back at its home): the host's other
   *  workers learn it. */
  onPlaced: ((key: number, ep: Endpoint, home: boolean) => void) | null = null;

  get size(): number {
    return this.map.size;
  }

  /** Where the conversation was placed, if not at its home. */
  get(key: number): Endpoint | undefined {
    return this.map.size === 0 ? undefined : this.map.get(key);
  }

  /** The conversation was placed on `ep`, its home: remembered (home: forgotten), and told. */
  place(key: number, ep: Endpoint, home: boolean): void {
    if (this.keep(key, ep, home)) this.onPlaced?.(key, ep, home);
  }

  /** Another worker of the host placed it. */
  placedElsewhere(key: number, ep: Endpoint, home: boolean): void {
    this.keep(key, ep, home);
  }

  /** False when nothing changed. */
  private keep(key: number, ep: Endpoint, home: boolean): boolean {
    const was = this.map.get(key);
    if (home) return was !== undefined && this.map.delete(key);
    if (was === ep) return false;
    if (was !== undefined) this.map.delete(key);
    this.map.set(key, ep);
    if (this.map.size > MAX) this.map.delete(this.map.keys().next().value as number);
    return true;
  }
}
