// The bounded in-memory store behind `previous_response_id` for translated Responses requests
// (translators.responses.store; off by default: the gateway is stateless unless asked). A stored
// response keeps the conversation as input items — the earlier items, the request's own input,
// then its output — so the next request continues it by id, on any endpoint. Bounded three ways:
// a number of responses, a total size (JSON characters), an age; the oldest go first. It lives
// in this process only: a restart, or another replica, does not know its ids.
import type { InputItem, OutputItem } from './types.js';

export interface StoreSettings { max_responses: number; max_bytes: number; ttl: number }

interface Entry { items: readonly InputItem[]; bytes: number; at: number }

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

  /** The conversation up to and including the response, or undefined (unknown or expired). */
  get(id: string, now = Date.now()): readonly InputItem[] | undefined {
    const e = this.entries.get(id);
    if (!e) return undefined;
    if (now - e.at > this.settings.ttl) {
      this.remove(id, e);
      return undefined;
    }
    return e.items;
  }

  put(id: string, before: readonly InputItem[], output: readonly OutputItem[], now = Date.now()): void {
    if (!this.enabled) return;
    const items = [...before, ...(output as readonly InputItem[])];
    const bytes = JSON.stringify(items).length;
    if (bytes > this.settings.max_bytes) return; // one conversation larger than the whole store
    this.entries.set(id, { items, bytes, at: now });
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
      this.remove(id, e);
    }
  }

  private remove(id: string, e: Entry): void {
    this.entries.delete(id);
    this.bytes -= e.bytes;
  }
}
