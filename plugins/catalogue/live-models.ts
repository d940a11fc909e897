// The catalogue as a family's clients should see it: only the models some routable endpoint
// serves now, each narrowed to its routable endpoints (an offline endpoint's list is kept by the
// catalogue so routing can say "unavailable", but a model list must not offer its models).
import type { CatalogueModel, Endpoint, PluginEnv } from '../../engine/api.js';

function narrowed(m: CatalogueModel, live: Endpoint[]): CatalogueModel {
  const names = [...new Set(live.map((e) => m.servedAs.get(e)!.name))];
  // The id is the first serving endpoint's name: the first live one's now.
  return { ...m, id: names[0], names, endpoints: live };
}

export function liveModels(models: readonly CatalogueModel[]): CatalogueModel[] {
  const out: CatalogueModel[] = [];
  for (const m of models) {
    if (m.endpoints.every((e) => e.routable)) {
      out.push(m);
      continue;
    }
    const live = m.endpoints.filter((e) => e.routable);
    if (live.length) out.push(narrowed(m, live));
  }
  return out;
}

/**
 * A value derived from the catalogue and endpoint health, rebuilt only after either changed
 * (both keep a version counter), so a model list costs a map read between changes.
 */
export class LiveCache<T> {
  private catalogueVersion = -1;
  private healthVersion = -1;
  private value: T | undefined;

  constructor(
    private readonly env: Pick<PluginEnv, 'catalogue' | 'endpoints'>,
    private readonly build: () => T,
  ) {}

  get(): T {
    const { catalogue, endpoints } = this.env;
    if (this.value === undefined || this.catalogueVersion !== catalogue.version || this.healthVersion !== endpoints.version) {
      this.value = this.build();
      this.catalogueVersion = catalogue.version;
      this.healthVersion = endpoints.version;
    }
    return this.value;
  }
}
