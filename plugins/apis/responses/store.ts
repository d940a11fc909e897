// The bounded in-memory store behind `previous_response_id` for translated Responses requests
// (translators.responses.store; off by default: the gateway is stateless unless asked). Each
// stored response keeps its own turn — the request's input items, then its output — and the id
// of the response it continued; a conversation is rebuilt by walking back from its last response,
// so the next request continues it on any endpoint, and each turn is counted once. Bounded three
// ways: a number of responses, a total size (JSON characters), an age; the least recently
// continued conversations go first (continuing one makes its whole chain recent). It lives in
// this process only: a restart, or another replica, does not know its ids.
import type { InputItem, OutputItem } from './types.js';

export interface StoreSettings {
  max_responses: number;
  max_bytes: number;
  ttl: number;
}

interface Entry {
  parent: string | undefined;
  items: readonly InputItem[];
  bytes: number;
  at: number;
}

export class ResponseStore {
  private readonly entries = new Map<string, Entry>();
  private bytes = 0;

  constructor(private settings: StoreSettings) {}

  get enabled(): boolean {
    return this.settings.max_responses > 0;
  }

  /** New limits (a config reload): applied at once, evicting what no longer fits. */
  configure(settings: StoreSettings, now = Date.now()): void {
    this.settings = settings;
    this.evict(now);
  }

  /** The conversation up to and including the response, oldest item first; undefined when the
   *  response, or one before it, is unknown or expired. */
  get(id: string, now = Date.now()): InputItem[] | undefined {
    const turns: (readonly InputItem[])[] = [];
    for (let at: string | undefined = id; at !== undefined; ) {
      const e = this.entries.get(at);
      if (!e || now - e.at > this.settings.ttl) return undefined;
      turns.push(e.items);
      at = e.parent;
    }
    return turns.reverse().flat();
  }

  /** Keep a response: its turn (`input` then `output`) and the response it continued, if any. */
  put(id: string, parent: string | undefined, input: readonly InputItem[], output: readonly OutputItem[], now = Date.now()): void {
    if (!this.enabled) return;
    const items = [...input, ...(output as readonly InputItem[])];
    const bytes = JSON.stringify(items).length;
    if (bytes > this.settings.max_bytes) return; // one turn larger than the whole store
    // The chain it continues becomes recent, oldest first, so it is evicted after newer ones.
    const chain: string[] = [];
    for (let at = parent; at !== undefined && chain.length < this.entries.size; at = this.entries.get(at)?.parent) chain.push(at);
    for (const key of chain.reverse()) {
      const e = this.entries.get(key);
      if (!e) continue;
      this.entries.delete(key);
      this.entries.set(key, { ...e, at: now });
    }
    this.entries.set(id, { parent, items, bytes, at: now });
    this.bytes += bytes;
    this.evict(now);
  }

  get size(): number {
    return this.entries.size;
  }

  private evict(now: number): void {
    const { max_responses, max_bytes, ttl } = this.settings;
    for (const [id, e] of this.entries) {
      if (this.entries.size <= max_responses && this.bytes <= max_bytes && now - e.at <= ttl) break;
      this.entries.delete(id);
      this.bytes -= e.bytes;
    }
  }
}
