// The model catalogue: what each endpoint serves, and one deduplicated view per backend family
// (by digest where the backend gives one, else by name; never merged across families). Views
// are rebuilt lazily after a change, so routing lookups are map reads.
import type { Endpoint } from './endpoints.js';
import type { Profile } from '../core/profiles.js';
import type { DiscoveredModel } from './model-lists.js';
import { NameIndex, type Named, type NameRules } from './model-names.js';
import { compileTraits, type ModelTraits, type TraitMatcher } from './model-traits.js';

export interface CatalogueModel {
  /** The name of the first endpoint (configuration order) serving it. */
  id: string;
  family: string;
  digest?: string;
  /** Every name endpoints use for it (they differ when deduplicated by digest). */
  names: string[];
  endpoints: Endpoint[];
  /** What each endpoint reported. */
  servedAs: Map<Endpoint, DiscoveredModel>;
  embedding: boolean;
  vision: boolean;
  code: boolean;
  contextWindow: number;
  maxTokens: number;
}

interface FamilyView {
  models: CatalogueModel[];
  /** Listed name → endpoints (any health) listing it, by the lookup rule (model-names.ts). */
  servedBy: NameIndex<Endpoint[]>;
  /** The family's naming rules (its profile's). */
  rules: NameRules;
  /** Some endpoint of the family lists at least one model: there is something to judge by. */
  known: boolean;
}

/** Two endpoint lists as one, each endpoint once. */
const union = (a: Endpoint[], b: Endpoint[]): Endpoint[] => (b.every((e) => a.includes(e)) ? a : [...new Set([...a, ...b])]);

/** Models by every name they are listed under, each under its family's rules (first listed wins). */
export function indexModels<M extends CatalogueModel>(models: readonly M[]): NameIndex<M> {
  const index = new NameIndex<M>();
  for (const m of models) {
    const rules = m.endpoints[0].profile.models;
    for (const name of m.names) index.add(name, m, rules);
  }
  return index;
}

interface Entry {
  models: DiscoveredModel[];
  at: number;
  /** Invalidated (the endpoint stopped being routable): kept so routing can tell "unavailable"
   *  from "unknown", replaced by the next discovery. */
  stale: boolean;
}

const EMPTY: FamilyView = { models: [], servedBy: new NameIndex(), rules: { provider_prefixed: false }, known: false };

export class Catalogue {
  private readonly lists = new Map<Endpoint, Entry>();
  private readonly views = new Map<string, FamilyView>();
  private readonly traits = new Map<string, TraitMatcher>();
  /** Across families (msgapi routes, /gw/models/{id}); rebuilt after a change. */
  private anyEndpoints: NameIndex<Endpoint[]> | null = null;
  private anyModels: NameIndex<CatalogueModel> | null = null;

  private familyNames: readonly string[] = [];
  /** Told when an endpoint's list was set, marked stale or dropped (the host passes it on to its workers). */
  onList: ((ep: Endpoint) => void) | null = null;

  /** `endpoints` reads the live list (it changes on reload). */
  constructor(private readonly endpoints: () => readonly Endpoint[]) {
    this.reconcile([]);
  }

  /** After a reload: the removed endpoints' lists go; profiles (traits) and families may have changed. */
  reconcile(removed: readonly Endpoint[]): void {
    for (const ep of removed) this.lists.delete(ep);
    this.familyNames = [...new Set(this.endpoints().map((e) => e.family))];
    this.traits.clear();
    this.views.clear();
    this.dropIndexes();
    this.version++;
  }

  set(ep: Endpoint, models: DiscoveredModel[], at = Date.now()): void {
    this.lists.set(ep, { models, at, stale: false });
    this.changed(ep.family);
    this.onList?.(ep);
  }

  /** Mark an endpoint's list out of date; it stays known until rediscovered or swept. */
  invalidate(ep: Endpoint): void {
    const entry = this.lists.get(ep);
    if (entry && !entry.stale) {
      entry.stale = true;
      this.changed(ep.family);
      this.onList?.(ep);
    }
  }

  clear(ep: Endpoint): void {
    if (!this.lists.delete(ep)) return;
    this.changed(ep.family);
    this.onList?.(ep);
  }

  /** An endpoint's list as the host keeps it (models, when read, whether stale), for its workers. */
  entryOf(ep: Endpoint): { models: DiscoveredModel[]; at: number; stale: boolean } | undefined {
    return this.lists.get(ep);
  }

  /** The list an endpoint reported, or undefined when it has not reported one. */
  listOf(ep: Endpoint): readonly DiscoveredModel[] | undefined {
    return this.lists.get(ep)?.models;
  }

  /** Drop lists not refreshed for `maxAgeMs` (stale); returns the endpoints dropped. */
  sweep(maxAgeMs: number, now = Date.now()): Endpoint[] {
    const dropped = [...this.lists].filter(([, e]) => now - e.at > maxAgeMs).map(([ep]) => ep);
    for (const ep of dropped) this.clear(ep);
    return dropped;
  }

  family(name: string): FamilyView {
    let view = this.views.get(name);
    if (!view) {
      view = this.build(name);
      this.views.set(name, view);
    }
    return view;
  }

  /** Endpoints (any health) of the family that list the model, by the lookup rule (model-names.ts). */
  servedBy(family: string, model: string): readonly Endpoint[] {
    return this.family(family).servedBy.find(model)?.value ?? [];
  }

  /** Endpoints of any family listing the model: a full name listed in any family wins over the
   *  shortened names of the lookup rule. */
  servedByAny(model: string): readonly Endpoint[] {
    if (!this.anyEndpoints) {
      const index = new NameIndex<Endpoint[]>(union);
      for (const family of this.familyNames) {
        const view = this.family(family);
        for (const { name, value } of view.servedBy.entries()) index.add(name, value, view.rules);
      }
      this.anyEndpoints = index;
    }
    return this.anyEndpoints.find(model)?.value ?? [];
  }

  /** A model of any family (any health) by the lookup rule, with the listed name that matched. */
  find(model: string): Named<CatalogueModel> | undefined {
    this.anyModels ??= indexModels(this.all());
    return this.anyModels.find(model);
  }

  anyKnown(): boolean {
    return this.familyNames.some((f) => this.family(f).known);
  }

  /** Every model of every family, families in profile order. */
  all(): CatalogueModel[] {
    return this.familyNames.flatMap((f) => this.family(f).models);
  }

  traitsOf(profile: Profile, name: string): ModelTraits {
    let m = this.traits.get(profile.name);
    if (!m) this.traits.set(profile.name, (m = compileTraits(profile)));
    return m(name);
  }

  /** Bumped on every change, so callers can cache what they derive from the catalogue. */
  version = 0;

  private changed(family: string): void {
    this.version++;
    this.views.delete(family);
    this.dropIndexes();
  }

  private dropIndexes(): void {
    this.anyEndpoints = null;
    this.anyModels = null;
  }

  private build(family: string): FamilyView {
    const eps = this.endpoints().filter((e) => e.family === family && this.lists.has(e));
    if (eps.length === 0) return EMPTY;
    const byKey = new Map<string, CatalogueModel>();
    const byName = new Map<string, Endpoint[]>();
    for (const ep of eps) {
      for (const m of this.lists.get(ep)!.models) {
        const served = byName.get(m.name);
        if (served) {
          if (!served.includes(ep)) served.push(ep);
        } else byName.set(m.name, [ep]);
        const key = m.digest ? `digest:${m.digest}` : `name:${m.name}`;
        let entry = byKey.get(key);
        if (!entry) {
          const t = this.traitsOf(ep.profile, m.name);
          const embedding = m.kind === 'embeddings' || t.embedding;
          entry = {
            id: m.name,
            family,
            digest: m.digest,
            names: [],
            endpoints: [],
            servedAs: new Map(),
            embedding,
            vision: m.kind === 'vlm' || t.vision,
            code: t.code,
            contextWindow: m.context ?? t.contextWindow,
            maxTokens: m.maxTokens ?? m.context ?? t.contextWindow,
          };
          byKey.set(key, entry);
        }
        if (!entry.names.includes(m.name)) entry.names.push(m.name);
        if (!entry.endpoints.includes(ep)) entry.endpoints.push(ep);
        entry.servedAs.set(ep, m);
      }
    }
    const rules = eps[0].profile.models;
    const servedBy = new NameIndex<Endpoint[]>(union);
    for (const [name, served] of byName) servedBy.add(name, served, rules);
    return { models: [...byKey.values()], servedBy, rules, known: byName.size > 0 };
  }
}
