// Which endpoints may serve one name, for one family (proxy routes) or across all (msgapi): an
// alias's (the endpoints serving any of its real names), or a model's by the routing strategy
// (strict, optimistic, discovery). Each answer is a Choice — endpoints, decision and reason — that
// select-endpoint turns into the route plan; a rejection carries the error the client gets.
//
// X-Gw-Routing-Reason vocabulary: model_found, alias, discovered, catalogue_empty,
// fallback_compatible, fallback_all, model_not_found, model_unavailable, alias_not_found,
// alias_unavailable, no_compatible_endpoint; capability_* (routing/route-kinds.ts); model_management,
// last_resort (select-endpoint); model_fallback (routing/fallback-chain.ts and the attempt loop).
import { gwError, type Endpoint, type GatewayError, type PluginEnv, type RoutingInfo } from '../../engine/api.js';
import type { Families } from './families.js';
import { describeDown, downHint } from './unavailable-hint.js';

/** What a routing step does when the model is served, but only by endpoints that take no traffic
 *  now (or no endpoint is routable at all): refuse (503), or go on with no candidates — for a
 *  terminal step that can answer without a backend (count-tokens' estimate). */
export type Unavailable = 'refuse' | 'continue';
export const UNAVAILABLE_OPTION = {
  enum: ['refuse', 'continue'],
  default: 'refuse',
  description:
    'A model served only by endpoints that take no traffic now, or no routable endpoint at all: refuse (503 MODEL_UNAVAILABLE, ENDPOINT_UNAVAILABLE), or continue with no candidates for a terminal step that answers without a backend (count-tokens)',
} as const;

/** 503 MODEL_UNAVAILABLE: the endpoints serving the name, where they listen, and what to do. */
const unavailable = (env: PluginEnv, model: string, families: Families, down: readonly Endpoint[]) =>
  gwError('MODEL_UNAVAILABLE', { model, provider: families.label, endpoints: describeDown(down), hint: downHint(down, env.source) });

/** The endpoints one name may go to, in no order yet, and how routing decided. */
export interface Choice {
  endpoints: readonly Endpoint[];
  decision: RoutingInfo['decision'];
  reason: string;
  /** The real name each endpoint is sent (an alias's targets); absent: the name itself. */
  realName?: ReadonlyMap<Endpoint, string>;
  /** A rejection: the error the client gets, unless the step goes on without candidates
   *  (`unavailable: continue`, for a name served only by endpoints that take no traffic now). */
  error?: GatewayError;
}

const choice = (endpoints: readonly Endpoint[], decision: RoutingInfo['decision'], reason: string): Choice => ({ endpoints, decision, reason });
const rejected = (reason: string, error: GatewayError): Choice => ({ endpoints: [], decision: 'rejected', reason, error });

/** May a rejection go on without candidates (the name is served, by endpoints down now)? */
export const continuable = (c: Choice) => c.reason.endsWith('_unavailable');

/** Per alias: which routable endpoint serves which real name, valid while neither the catalogue
 *  nor endpoint health changed (shared by the requests in between, never mutated). */
export type AliasCache = Map<string, { catalogue: number; health: number; targets: Map<Endpoint, string> }>;

export function aliasTargetsOf(env: PluginEnv, families: Families, alias: string, targets: readonly string[], cache: AliasCache): Map<Endpoint, string> {
  const hit = cache.get(alias);
  if (hit && hit.catalogue === env.catalogue.version && hit.health === env.endpoints.version) return hit.targets;
  const map = new Map<Endpoint, string>();
  for (const ep of families.routable()) {
    const name = targets.find((t) => env.catalogue.servedBy(ep.family, t).includes(ep));
    if (name) map.set(ep, name);
  }
  cache.set(alias, { catalogue: env.catalogue.version, health: env.endpoints.version, targets: map });
  return map;
}

/** An alias: the endpoints serving any of its targets (in the alias's order of preference); with
 *  none, strict routing rejects it, the others route it as an ordinary name (undefined). */
export function aliasChoice(
  env: PluginEnv,
  families: Families,
  routable: readonly Endpoint[],
  alias: string,
  targets: readonly string[],
  cache: AliasCache,
): Choice | undefined {
  if (!families.known()) return undefined;
  const map = aliasTargetsOf(env, families, alias, targets, cache);
  if (map.size > 0)
    return {
      ...choice(
        routable.filter((e) => map.has(e)),
        'routed',
        'alias',
      ),
      realName: map,
    };
  if (env.config.model_registry.routing_strategy.type !== 'strict') return undefined;
  const down = [...new Set(targets.flatMap((t) => families.servedBy(t)))];
  if (down.length) return rejected('alias_unavailable', unavailable(env, alias, families, down));
  return rejected(
    'alias_not_found',
    gwError('MODEL_NOT_FOUND', { model: alias, provider: families.label, hint: `alias targets ${targets.join(', ')} are not discovered on any endpoint` }),
  );
}

/** A model: the routing strategy's endpoints for it, or 'refresh' when the discovery strategy
 *  wants the catalogue refreshed first (`refreshed`: it was). */
export function modelChoice(env: PluginEnv, families: Families, routable: readonly Endpoint[], model: string, refreshed: boolean): Choice | 'refresh' {
  const { catalogue } = env;
  const rs = env.config.model_registry.routing_strategy;
  if (!families.known()) return choice(routable, 'routed', 'catalogue_empty');
  const serving = families.servedBy(model);
  const live = serving.length ? routable.filter((e) => serving.includes(e)) : [];
  if (live.length) return choice(live, 'routed', refreshed ? 'discovered' : 'model_found');
  if (rs.type === 'discovery' && rs.options.discovery_refresh_on_miss && !refreshed) return 'refresh';
  if (rs.type === 'optimistic' && rs.options.fallback_behavior !== 'none') {
    if (rs.options.fallback_behavior === 'all') return choice(routable, 'fallback', 'fallback_all');
    // Compatible: endpoints that may load it on demand (no list yet, or an empty one), or that
    // serve models of the same kind (embedding or generation).
    const compatible = routable.filter((e) => {
      const list = catalogue.listOf(e);
      if (!list || list.length === 0) return true;
      const embedding = catalogue.traitsOf(e.profile, model).embedding;
      return catalogue.family(e.family).models.some((m) => m.endpoints.includes(e) && m.embedding === embedding);
    });
    if (compatible.length) return choice(compatible, 'fallback', 'fallback_compatible');
    return rejected(
      'no_compatible_endpoint',
      gwError('MODEL_NOT_FOUND', {
        model,
        provider: families.label,
        hint: 'no compatible endpoint is routable (model_registry.routing_strategy.options.fallback_behavior: compatible_only)',
      }),
    );
  }
  if (serving.length) return rejected('model_unavailable', unavailable(env, model, families, serving));
  return rejected(
    'model_not_found',
    gwError('MODEL_NOT_FOUND', {
      model,
      provider: families.label,
      hint: `GET /gw/models${families.label ? `?provider=${families.label}` : ''} lists what is served`,
    }),
  );
}
