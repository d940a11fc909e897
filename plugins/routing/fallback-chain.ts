// The route plan of a fallback chain (model_fallbacks, or an alias marked ordered): the endpoints
// of the first name in balancing order, then those of the next, and so on; each name is an alias
// (its endpoints, each sent its real name) or a model (the routing strategy's endpoints for it).
// The attempt loop walks them in order, so a fallback model is tried only after the endpoints of
// the names before it failed. A name nothing can serve now is left out; when that is the primary,
// the request goes straight to its fallback (X-Gw-Routing-Decision: fallback).
import {
  gwError,
  PlanBuilder,
  type AffinityNote,
  type Context,
  type Endpoint,
  type GatewayError,
  type ModelRoute,
  type PluginEnv,
  type RoutePlan,
  type RoutingInfo,
} from '../../engine/api.js';
import type { AffinityKey } from './affinity.js';
import type { Order } from './balancing.js';
import type { Families } from './families.js';
import { aliasChoice, modelChoice, type AliasCache, type Choice } from './model-routing.js';

export interface ChainRouting {
  env: PluginEnv;
  families: Families;
  cache: AliasCache;
  order: Order;
  /** The step's shared routing decisions (one object per reason). */
  routing: (decision: RoutingInfo['decision'], reason: string) => RoutingInfo;
  /** What affinity did with the ordered endpoints of the name it placed (`names`: its real names). */
  affinity: (ctx: Context, ordered: readonly Endpoint[], key: AffinityKey | null, names: (ctx: Context) => readonly string[]) => AffinityNote;
}

/** The chain's plan, or why nothing of it can be served (the first name's rejection). Affinity's
 *  `key` (undefined: no say) places the first name that can be served: where the conversation goes. */
export function chainPlan(
  r: ChainRouting,
  routable: readonly Endpoint[],
  route: ModelRoute,
  ctx: Context,
  key: AffinityKey | null | undefined,
): RoutePlan | { error: GatewayError; reason: string } {
  const plan = new PlanBuilder();
  let rejection: Choice | undefined;
  let primaryServed = false;
  let note: AffinityNote | undefined;
  route.groups.forEach((g, i) => {
    // Refreshed: a chain does not wait for discovery, its next name is the answer to a miss.
    const c = g.targets
      ? aliasChoice(r.env, r.families, routable, g.name, g.targets, r.cache)
      : (modelChoice(r.env, r.families, routable, g.name, true) as Choice);
    if (c?.error) rejection ??= c;
    if (!c || c.endpoints.length === 0) return;
    if (i === 0) primaryServed = true;
    const real = c.realName;
    const placed = plan.size === 0 && key !== undefined;
    const ordered = r.order(c.endpoints, placed ? key : undefined, real ? undefined : g.name);
    if (placed) note = r.affinity(ctx, ordered, key, () => g.targets ?? [g.name]);
    plan.add(i, ordered, real ? (ep) => real.get(ep) : () => g.name, i > 0 ? 'fallback' : real ? 'alias' : 'requested');
  });
  if (plan.size === 0) {
    const error =
      rejection?.error ??
      gwError('MODEL_NOT_FOUND', { model: route.requested, hint: `no routable endpoint serves any of ${route.groups.map((g) => g.name).join(', ')}` });
    return { error, reason: rejection?.reason ?? 'model_not_found' };
  }
  return plan.build(
    primaryServed ? r.routing('routed', 'model_found') : r.routing('fallback', `model_fallback (${route.requested}: not served by any routable endpoint)`),
    route.requested,
    note,
  );
}
