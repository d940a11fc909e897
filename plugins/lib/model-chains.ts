// The two kinds of virtual model names in the config, read once at load:
// - aliases (model_aliases as a list): equivalent real names; any endpoint serving one of them
//   takes the request (alias-resolve);
// - fallback chains: model_fallbacks ({model or alias: [next, next]}) and aliases marked
//   `ordered`: the names in order, the next one only when every endpoint of the one before
//   failed the request (select-endpoint lays the candidates out, the kernel walks them).
// A Map each: a name comes from the request body, and "__proto__" must read as a name.
import type { GatewayConfig } from '../../engine/core/config.js';

export interface ModelNames {
  /** Unordered aliases: name → equivalent real names. */
  aliases: ReadonlyMap<string, readonly string[]>;
  /** Fallback chains: name → the names tried in order, the first being the primary. */
  chains: ReadonlyMap<string, readonly string[]>;
  /** Every alias, ordered or not → its names (for lookups that show a record: /gw/models/{id}). */
  all: ReadonlyMap<string, readonly string[]>;
}

export function modelNames(config: GatewayConfig): ModelNames {
  const aliases = new Map<string, readonly string[]>();
  const chains = new Map<string, readonly string[]>();
  const all = new Map<string, readonly string[]>();
  for (const [name, value] of Object.entries(config.model_aliases)) {
    const models = Array.isArray(value) ? value : value.models;
    all.set(name, models);
    if (!Array.isArray(value) && value.ordered) chains.set(name, models);
    else aliases.set(name, models);
  }
  for (const [name, next] of Object.entries(config.model_fallbacks)) {
    // An ordered alias with fallbacks of its own: its chain, then them.
    chains.set(name, [...(chains.get(name) ?? [name]), ...next.filter((n) => n !== name)]);
  }
  return { aliases, chains, all };
}
