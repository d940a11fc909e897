// Model-aware candidate selection, for one family (proxy routes) or across all (msgapi):
// aliases first, then the routing strategy (strict, optimistic, discovery).
//
// X-Gw-Routing-Reason vocabulary: model_found, alias, discovered, catalogue_empty,
// fallback_compatible, fallback_all, model_not_found, model_unavailable, alias_not_found,
// alias_unavailable, no_compatible_endpoint; model_fallback (lib/fallback-chain.ts and the kernel),
// last_resort (select-endpoint).
import type { Context, RoutingInfo } from '../../engine/kernel/context.js';
import type { Endpoint } from '../../engine/backends/endpoints.js';
import { gwError } from '../../engine/core/errors.js';
import type { PluginEnv } from '../../engine/kernel/plugin.js';
import type { Profile } from '../../engine/core/profiles.js';

/** The families a step works on: its route's family, or every family. */
export const familiesOf = (env: PluginEnv): readonly Profile[] => (env.profile ? [env.profile] : env.profiles.list);

/** `families` is either one family or every family (familiesOf), so the all-families lists serve the latter. */
export function routableIn(env: PluginEnv, families: readonly Profile[]): readonly Endpoint[] {
  return families.length === 1 ? env.endpoints.routable(families[0].name) : env.endpoints.routableAll;
}

function servedBy(env: PluginEnv, families: readonly Profile[], model: string): readonly Endpoint[] {
  return families.length === 1 ? env.catalogue.servedBy(families[0].name, model) : env.catalogue.servedByAny(model);
}

/** The family named in errors; none when the step works across every family (msgapi). */
const label = (families: readonly Profile[]) => (families.length === 1 ? families[0].name : undefined);

/** What a routing step does when the model is served, but only by endpoints that take no traffic
 *  now (or no endpoint is routable at all): refuse (503), or go on with no candidates — for a
 *  terminal step that can answer without a backend (count-tokens' estimate). */
export type Unavailable = 'refuse' | 'continue';
export const UNAVAILABLE_OPTION = {
  enum: ['refuse', 'continue'], default: 'refuse',
  description: 'A model served only by endpoints that take no traffic now, or no routable endpoint at all: refuse (503 MODEL_UNAVAILABLE, ENDPOINT_UNAVAILABLE), or continue with no candidates for a terminal step that answers without a backend (count-tokens)',
} as const;
/** No endpoint for the alias: shared, never filled. */
const NO_TARGETS = new Map<Endpoint, string>();

/** Per alias: which routable endpoint serves which real name, valid while neither the catalogue
 *  nor endpoint health changed (the map is shared by the requests in between, never mutated). */
export type AliasCache = Map<string, { catalogue: number; health: number; targets: Map<Endpoint, string> }>;

export function aliasTargetsOf(env: PluginEnv, families: readonly Profile[], model: string, targets: readonly string[], cache: AliasCache): Map<Endpoint, string> {
  const hit = cache.get(model);
  if (hit && hit.catalogue === env.catalogue.version && hit.health === env.endpoints.version) return hit.targets;
  const map = new Map<Endpoint, string>();
  for (const ep of routableIn(env, families)) {
    const name = targets.find((t) => env.catalogue.servedBy(ep.family, t).includes(ep));
    if (name) map.set(ep, name);
  }
  cache.set(model, { catalogue: env.catalogue.version, health: env.endpoints.version, targets: map });
  return map;
}

/** Alias rules 1–3: endpoints serving any target (alias order), or a strict rejection, or nothing. */
export function resolveAlias(ctx: Context, env: PluginEnv, families: readonly Profile[], model: string, targets: readonly string[], cache: AliasCache, unavailable: Unavailable = 'refuse'): void {
  const strategy = env.config.model_registry.routing_strategy.type;
  if (!(families.length === 1 ? env.catalogue.family(families[0].name).known : env.catalogue.anyKnown())) return;
  const aliasTargets = aliasTargetsOf(env, families, model, targets, cache);
  if (aliasTargets.size > 0) {
    ctx.routing = { strategy, decision: 'routed', reason: 'alias', aliasTargets };
    return;
  }
  if (strategy !== 'strict') return; // routed as an ordinary name
  const down = [...new Set(targets.flatMap((t) => servedBy(env, families, t)))];
  ctx.routing = { strategy, decision: 'rejected', reason: down.length ? 'alias_unavailable' : 'alias_not_found' };
  if (down.length && unavailable === 'continue') {
    ctx.routing.aliasTargets = NO_TARGETS; // select-endpoint: no candidates
    return;
  }
  if (down.length) throw gwError('MODEL_UNAVAILABLE', { model, provider: label(families), endpoints: down.map((e) => e.name).join(', ') });
  throw gwError('MODEL_NOT_FOUND', { model, provider: label(families), hint: `alias targets ${targets.join(', ')} are not discovered on any endpoint` });
}

/** Candidates for a named model, or 'refresh' when the discovery strategy wants a catalogue refresh first. */
export function modelCandidates(ctx: Context, env: PluginEnv, families: readonly Profile[], routable: readonly Endpoint[], model: string, refreshed: boolean, unavailable: Unavailable = 'refuse'): readonly Endpoint[] | 'refresh' {
  const { catalogue } = env;
  const rs = env.config.model_registry.routing_strategy;
  const decide = (decision: RoutingInfo['decision'], reason: string) => (ctx.routing = { strategy: rs.type, decision, reason });
  if (!(families.length === 1 ? catalogue.family(families[0].name).known : catalogue.anyKnown())) {
    decide('routed', 'catalogue_empty');
    return routable;
  }
  const serving = servedBy(env, families, model);
  const live = serving.length ? routable.filter((e) => serving.includes(e)) : [];
  if (live.length) {
    decide('routed', refreshed ? 'discovered' : 'model_found');
    return live;
  }
  if (rs.type === 'discovery' && rs.options.discovery_refresh_on_miss && !refreshed) return 'refresh';
  if (rs.type === 'optimistic' && rs.options.fallback_behavior !== 'none') {
    if (rs.options.fallback_behavior === 'all') {
      decide('fallback', 'fallback_all');
      return routable;
    }
    // Compatible: endpoints that may load it on demand (no list yet, or an empty one), or that
    // serve models of the same kind (embedding or generation).
    const compatible = routable.filter((e) => {
      const list = catalogue.listOf(e);
      if (!list || list.length === 0) return true;
      const embedding = catalogue.traitsOf(e.profile, model).embedding;
      return catalogue.family(e.family).models.some((m) => m.endpoints.includes(e) && m.embedding === embedding);
    });
    if (compatible.length) {
      decide('fallback', 'fallback_compatible');
      return compatible;
    }
    decide('rejected', 'no_compatible_endpoint');
    throw gwError('MODEL_NOT_FOUND', { model, provider: label(families), hint: 'no compatible endpoint is routable (model_registry.routing_strategy.options.fallback_behavior: compatible_only)' });
  }
  if (serving.length) {
    decide('rejected', 'model_unavailable');
    if (unavailable === 'continue') return [];
    throw gwError('MODEL_UNAVAILABLE', { model, provider: label(families), endpoints: serving.map((e) => e.name).join(', ') });
  }
  decide('rejected', 'model_not_found');
  throw gwError('MODEL_NOT_FOUND', { model, provider: label(families), hint: `GET /gw/models${families.length === 1 ? `?provider=${families[0].name}` : ''} lists what is served` });
}
