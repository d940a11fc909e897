// Aliases (model_aliases, ordered or not) as entries of the model lists, so a client that picks a
// model from a list sees the names it may send. An alias is listed once per family that serves
// one of its targets (the catalogue's lookup rule), after the models: the record of its first
// served target under the alias's name, on the endpoints of all its served targets, marked with
// the targets that family serves (`aliasOf`). A family that lists a model of the alias's own name
// shows that model only: one entry per name, as clients key models by id.
import { indexModels, type CatalogueModel, type DiscoveredModel, type Endpoint } from '../../engine/api.js';
import type { ListedModel } from './model-formats.js';

type Aliases = ReadonlyMap<string, readonly string[]>;

function aliasModel(alias: string, aliasOf: readonly string[], targets: readonly CatalogueModel[]): ListedModel {
  const t = targets[0];
  if (targets.length === 1) return { ...t, id: alias, names: [alias], aliasOf };
  const endpoints: Endpoint[] = [];
  const servedAs = new Map<Endpoint, DiscoveredModel>();
  for (const m of targets) {
    for (const ep of m.endpoints) {
      if (servedAs.has(ep)) continue;
      endpoints.push(ep);
      servedAs.set(ep, m.servedAs.get(ep)!);
    }
  }
  return { ...t, id: alias, names: [alias], endpoints, servedAs, aliasOf };
}

/** The models, then each alias once per family where one of its targets is among them. */
export function withAliases(models: readonly CatalogueModel[], aliases: Aliases): ListedModel[] {
  if (aliases.size === 0) return models as ListedModel[];
  const byFamily = new Map<string, CatalogueModel[]>();
  for (const m of models) {
    const list = byFamily.get(m.family);
    if (list) list.push(m);
    else byFamily.set(m.family, [m]);
  }
  const out: ListedModel[] = [...models];
  for (const family of byFamily.values()) {
    const index = indexModels(family);
    for (const [alias, targets] of aliases) {
      if (index.find(alias)?.name === alias) continue;
      const served: string[] = [];
      const found: CatalogueModel[] = [];
      for (const t of targets) {
        const m = index.find(t)?.value;
        if (!m) continue;
        served.push(t);
        if (!found.includes(m)) found.push(m);
      }
      if (found.length) out.push(aliasModel(alias, served, found));
    }
  }
  return out;
}
