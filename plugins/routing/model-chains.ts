// The virtual model names of the config, resolved once at load — the one place aliases and
// fallback chains become the names a request's model stands for (a ModelRoute):
// - an alias (model_aliases as a list): one name whose real names any serving endpoint takes;
// - a fallback chain (model_fallbacks {model or alias: [next, …]}, and aliases marked `ordered`):
//   the names in order, the next only when every endpoint of the one before failed the request.
//   A name in a chain may itself be an (unordered) alias.
// alias-resolve looks the body's model up here; select-endpoint maps the names onto endpoints.
// Maps, not objects: a name comes from the request body, and "__proto__" must read as a name.
import type { GatewayConfig, ModelRoute, NameGroup } from '../../engine/api.js';

export interface ModelNames {
  /** Every virtual name → what it stands for. */
  routes: ReadonlyMap<string, ModelRoute>;
  /** Every alias, ordered or not → its names (lookups that show a record: /gw/models/{id}). */
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
  const group = (name: string): NameGroup => Object.freeze({ name, targets: aliases.get(name) ?? null });
  const routes = new Map<string, ModelRoute>();
  for (const name of aliases.keys()) routes.set(name, Object.freeze({ requested: name, groups: Object.freeze([group(name)]) }));
  for (const [name, chain] of chains) routes.set(name, Object.freeze({ requested: name, groups: Object.freeze(chain.map(group)) }));
  return { routes, all };
}
