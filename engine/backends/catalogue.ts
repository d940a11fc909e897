// The model catalogue: what each endpoint serves, and one deduplicated view per backend family
// (by digest where the backend gives one, else by name; never merged across families). Views
// are rebuilt lazily after a change, so routing lookups are map reads.
import type { Endpoint } from './endpoints.js';
import type { Profile } from '../kernel/profiles.js';
import type { DiscoveredModel } from './model-lists.js';
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
  /** Name → endpoints (any health) listing it. */
  byName: Map<string, Endpoint[]>;
  /** Provider-prefixed families only: the part after "provider/" → endpoints listing the full name. */
  byBareName: Map<string, Endpoint[]> | null;
  /** Some endpoint of the family lists at least one model: there is something to judge by. */
  known: boolean;
}

/** The names a requested model is looked up by, in order: as given, then "name:latest" for an
 *  untagged name, then (provider-prefixed families) the part after "provider/". */
export function lookupNames(model: string, providerPrefixed: boolean): string[] {
  const names = [model];
  if (!model.includes(':')) names.push(`${model}:latest`);
  const slash = model.indexOf('/');
  if (providerPrefixed && slash > 0 && slash < model.length - 1) names.push(model.slice(slash + 1));
  return names;
}

/** A listed name as a provider-prefixed family's bare name ("openai/gpt-4o" → "gpt-4o"), or undefined. */
export function bareName(name: string): string | undefined {
  const slash = name.indexOf('/');
  return slash > 0 && slash < name.length - 1 ? name.slice(slash + 1) : undefined;
}

interface Entry {
  models: DiscoveredModel[];
  at: number;
  /** Invalidated (the endpoint stopped being routable): kept so routing can tell "unavailable"
   *  from "unknown", replaced by the next discovery. */
  stale: boolean;
}

const EMPTY: FamilyView = { models: [], byName: new Map(), byBareName: null, known: false };

export class Catalogue {
  private readonly lists = new Map<Endpoint, Entry>();
  private readonly views = new Map<string, FamilyView>();
  private readonly traits = new Map<string, TraitMatcher>();
  /** Name → endpoints of every family (msgapi routes across families); rebuilt after a change. */
  private anyIndex: Map<string, Endpoint[]> | null = null;

  private familyNames: readonly string[] = [];

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
    this.anyIndex = null;
    this.version++;
  }

  set(ep: Endpoint, models: DiscoveredModel[], at = Date.now()): void {
    this.lists.set(ep, { models, at, stale: false });
    this.changed(ep.family);
  }

  /** Mark an endpoint's list out of date; it stays known until rediscovered or swept. */
  invalidate(ep: Endpoint): void {
    const entry = this.lists.get(ep);
    if (entry && !entry.stale) {
      entry.stale = true;
      this.changed(ep.family);
    }
  }


  clear(ep: Endpoint): void {
    if (this.lists.delete(ep)) this.changed(ep.family);
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

  /** Endpoints (any health) that list the model, by lookupNames(); in a provider-prefixed family
   *  a bare name also matches a listed "provider/name". */
  servedBy(family: string, model: string): readonly Endpoint[] {
    const view = this.family(family);
    const hit = view.byName.get(model);
    if (hit) return hit;
    for (const name of lookupNames(model, view.byBareName !== null).slice(1)) {
      const eps = view.byName.get(name);
      if (eps) return eps;
    }
    return view.byBareName?.get(model) ?? [];
  }

  /** Endpoints of any family listing the model: a full-name match in any family first, then
   *  the per-family rules of servedBy. */
  servedByAny(model: string): readonly Endpoint[] {
    if (!this.anyIndex) {
      const index = new Map<string, Endpoint[]>();
      for (const family of this.familyNames) {
        for (const [name, eps] of this.family(family).byName) index.set(name, [...(index.get(name) ?? []), ...eps]);
      }
      this.anyIndex = index;
    }
    const hit = this.anyIndex.get(model) ?? (model.includes(':') ? undefined : this.anyIndex.get(`${model}:latest`));
    if (hit) return hit;
    const found: Endpoint[] = [];
    for (const family of this.familyNames) if (this.family(family).byBareName) found.push(...this.servedBy(family, model));
    return found;
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
    this.anyIndex = null;
  }

  private build(family: string): FamilyView {
    const eps = this.endpoints().filter((e) => e.family === family && this.lists.has(e));
    if (eps.length === 0) return EMPTY;
    const byKey = new Map<string, CatalogueModel>();
    const byName = new Map<string, Endpoint[]>();
    const prefixed = eps[0].profile.models.provider_prefixed;
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
            id: m.name, family, digest: m.digest, names: [], endpoints: [], servedAs: new Map(),
            embedding, vision: m.kind === 'vlm' || t.vision, code: t.code,
            contextWindow: m.context ?? t.contextWindow, maxTokens: m.maxTokens ?? m.context ?? t.contextWindow,
          };
          byKey.set(key, entry);
        }
        if (!entry.names.includes(m.name)) entry.names.push(m.name);
        if (!entry.endpoints.includes(ep)) entry.endpoints.push(ep);
        entry.servedAs.set(ep, m);
      }
    }
    let byBareName: Map<string, Endpoint[]> | null = null;
    if (prefixed) {
      byBareName = new Map();
      for (const [name, served] of byName) {
        const bare = bareName(name);
        if (bare !== undefined) byBareName.set(bare, [...new Set([...(byBareName.get(bare) ?? []), ...served])]);
      }
    }
    return { models: [...byKey.values()], byName, byBareName, known: byName.size > 0 };
  }
}
