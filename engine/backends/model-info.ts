// Context windows a model list does not carry. Ollama's api/tags has none: the context is in
// each model's api/show (`model_info["<arch>.context_length"]`). A profile that declares
// `api.model_info_path` gets it asked, during discovery, for the models whose list entry has
// no context: a few requests at a time, within the discovery's time budget, and cached by
// digest (the same weights have the same context), so a discovery cycle asks only for models
// it has not seen before.
import { request, type Dispatcher } from 'undici';
import type { Endpoint } from './endpoints.js';
import { readJson } from './json-reply.js';
import type { DiscoveredModel } from './model-lists.js';

const CONCURRENCY = 4;
/** A show reply carries the template, licence and parameters: generous, but bounded. */
const MAX_REPLY_BYTES = 4 * 1024 * 1024;
/** Distinct digests remembered; the oldest go first. */
const CACHE_SIZE = 4096;

type Raw = Record<string, unknown>;

/** The context length in an api/show reply: `<general.architecture>.context_length`, else the
 *  first `*.context_length` key of `model_info`; undefined when there is none. */
export function contextFromShow(body: unknown): number | undefined {
  const info = (body as Raw | null)?.model_info;
  if (!info || typeof info !== 'object') return undefined;
  const rec = info as Raw;
  const valid = (v: unknown) => (typeof v === 'number' && Number.isInteger(v) && v > 0 ? v : undefined);
  const arch = rec['general.architecture'];
  if (typeof arch === 'string' && valid(rec[`${arch}.context_length`])) return valid(rec[`${arch}.context_length`]);
  for (const key in rec) if (key.endsWith('.context_length') && valid(rec[key])) return valid(rec[key]);
  return undefined;
}

export class ModelInfo {
  /** Digest (or endpoint id + name for models without one) → context length; null when the
   *  backend answered and named none (asked once, like a found one). */
  private readonly cache = new Map<string, number | null>();

  constructor(private readonly dispatcher: Dispatcher) {}

  private key(ep: Endpoint, m: DiscoveredModel): string {
    return m.digest ?? `${ep.id}\u0000${m.name}\u0000${m.modified ?? ''}`;
  }

  /** The models with their context filled from the cache; `missing` lists those still to ask. */
  fromCache(ep: Endpoint, models: DiscoveredModel[]): { models: DiscoveredModel[]; missing: DiscoveredModel[] } {
    const missing: DiscoveredModel[] = [];
    const out = models.map((m) => {
      if (m.context !== undefined) return m;
      const context = this.cache.get(this.key(ep, m));
      if (context === undefined) missing.push(m);
      return context === undefined || context === null ? m : { ...m, context };
    });
    return { models: out, missing };
  }

  /** Ask the endpoint for each model's context (CONCURRENCY at a time, each within `signal`);
   *  returns how many were learnt. Failures are left to the next cycle. */
  async fetch(ep: Endpoint, path: string, models: readonly DiscoveredModel[], signal: AbortSignal): Promise<{ learnt: number; errors: string[] }> {
    const queue = [...models];
    const errors: string[] = [];
    let learnt = 0;
    const url = ep.origin + ep.upstreamPath(path);
    const worker = async () => {
      for (let m = queue.shift(); m && !signal.aborted; m = queue.shift()) {
        try {
          const res = await request(url, {
            method: 'POST',
            headers: [...ep.headers, 'content-type', 'application/json'],
            // `model` is today's field, `name` the older one: each version reads its own.
            body: JSON.stringify({ model: m.name, name: m.name }),
            signal,
            dispatcher: this.dispatcher,
          });
          if (res.statusCode !== 200) {
            await res.body.dump();
            throw new Error(`answered ${res.statusCode}`);
          }
          const context = contextFromShow(await readJson(res.body, MAX_REPLY_BYTES, 'model info'));
          this.remember(this.key(ep, m), context ?? null);
          if (context !== undefined) learnt++;
        } catch (err) {
          errors.push(`${m.name}: ${err instanceof SyntaxError ? 'not JSON' : (err as Error).message}`);
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(CONCURRENCY, queue.length) }, worker));
    return { learnt, errors };
  }

  private remember(key: string, context: number | null): void {
    this.cache.delete(key);
    this.cache.set(key, context);
    if (this.cache.size > CACHE_SIZE) this.cache.delete(this.cache.keys().next().value!);
  }
}
