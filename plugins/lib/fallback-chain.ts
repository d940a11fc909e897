// The candidates of a fallback chain (model_fallbacks, or an alias marked ordered): the endpoints
// of the first name in balancing order, then those of the next, and so on; each name is an alias
// (its endpoints and their real names) or a model (the routing strategy's endpoints for it). The
// kernel walks them in order, so a fallback model is tried only after every endpoint of the
// models before it failed. A name nothing can serve now is left out; when that is the primary,
// the request goes straight to its fallback (X-Gw-Routing-Decision: fallback).
import type { Endpoint } from '../../engine/backends/endpoints.js';
import type { Context } from '../../engine/kernel/context.js';
import { gwError } from '../../engine/core/errors.js';
import type { PluginEnv } from '../../engine/kernel/plugin.js';
import type { Profile } from '../../engine/core/profiles.js';
import type { Order } from './balancing.js';
import { aliasTargetsOf, modelCandidates, type AliasCache } from './model-routing.js';

export interface ChainRouting {
  env: PluginEnv;
  families: readonly Profile[];
  aliases: ReadonlyMap<string, readonly string[]>;
  cache: AliasCache;
  order: Order;
}

export function routeChain(ctx: Context, r: ChainRouting, routable: readonly Endpoint[], chain: readonly string[]): void {
  const candidates: Endpoint[] = [];
  const models: string[] = [];
  let firstError: unknown = null;
  let primaryServed = false;
  const strategy = r.env.config.model_registry.routing_strategy.type;
  chain.forEach((name, i) => {
    let group: readonly Endpoint[];
    let real: (ep: Endpoint) => string = () => name;
    const targets = r.aliases.get(name);
    if (targets) {
      const map = aliasTargetsOf(r.env, r.families, name, targets, r.cache);
      group = routable.filter((e) => map.has(e));
      real = (ep) => map.get(ep)!;
    } else {
      try {
        // Refreshed: a chain does not wait for discovery, its next name is the answer to a miss.
        group = modelCandidates(ctx, r.env, r.families, routable, name, true) as readonly Endpoint[];
      } catch (err) {
        firstError ??= err;
        group = [];
      }
    }
    if (group.length === 0) return;
    if (i === 0) primaryServed = true;
    else if (candidates.length > 0 && ctx.fallbackFrom === Infinity) ctx.fallbackFrom = candidates.length;
    for (const ep of r.order(group)) {
      candidates.push(ep);
      models.push(real(ep));
    }
  });
  if (candidates.length === 0) throw firstError ?? gwError('MODEL_NOT_FOUND', { model: chain[0], hint: `no routable endpoint serves any of ${chain.join(', ')}` });
  if (primaryServed) ctx.routing = { strategy, decision: 'routed', reason: 'model_found' };
  else {
    ctx.fallbackFrom = 0;
    ctx.routing = { strategy, decision: 'fallback', reason: `model_fallback (${chain[0]}: not served by any routable endpoint)` };
  }
  ctx.candidates = candidates;
  ctx.candidateModels = models;
}
