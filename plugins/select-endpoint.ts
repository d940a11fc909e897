// Choose the candidate endpoints and the order they are tried in: the first gets the request,
// the rest are the failover path. When the body names a model, candidates are the family's
// routable endpoints serving it (model_registry.routing_strategy decides what happens when none
// does); then the balancing strategy orders them: priority, round-robin, least-connections.
import type { Context, RoutingInfo } from '../engine/context.js';
import { parseDuration } from '../engine/duration.js';
import type { Endpoint } from '../engine/endpoints.js';
import { gwError } from '../engine/errors.js';
import { definePlugin, type PluginEnv } from '../engine/plugin.js';

type Order = (routable: readonly Endpoint[]) => readonly Endpoint[];

const byPriority = (a: Endpoint, b: Endpoint) => b.priority - a.priority;

/** Highest priority first; endpoints sharing the top priority take turns. */
function priority(): Order {
  let turn = 0;
  return (routable) => {
    if (routable.length === 1) return routable;
    const sorted = [...routable].sort(byPriority);
    let tier = 1;
    while (tier < sorted.length && sorted[tier].priority === sorted[0].priority) tier++;
    if (tier > 1) {
      const k = turn++ % tier;
      return [...sorted.slice(k, tier), ...sorted.slice(0, k), ...sorted.slice(tier)];
    }
    return sorted;
  };
}

/** Each request starts one endpoint further along; failover continues around the ring. */
function roundRobin(): Order {
  let turn = 0;
  return (routable) => {
    const n = routable.length;
    if (n === 1) return routable;
    const k = turn++ % n;
    return [...routable.slice(k), ...routable.slice(0, k)];
  };
}

/** Fewest requests in flight first; ties go to the higher priority, then configuration order. */
function leastConnections(): Order {
  return (routable) => (routable.length === 1 ? routable : [...routable].sort((a, b) => a.active - b.active || byPriority(a, b)));
}

export const STRATEGIES: Record<string, () => Order> = {
  priority,
  'round-robin': roundRobin,
  round_robin: roundRobin,
  'least-connections': leastConnections,
  least_conn: leastConnections,
};

/**
 * The routing vocabulary of X-Gw-Routing-Reason:
 * model_found, alias, discovered, catalogue_empty, fallback_compatible, fallback_all,
 * model_not_found, model_unavailable, alias_not_found, alias_unavailable, no_compatible_endpoint.
 */
function modelCandidates(ctx: Context, env: PluginEnv, routable: readonly Endpoint[], model: string, refreshed: boolean): readonly Endpoint[] | 'refresh' {
  const family = env.profile!.name;
  const { catalogue } = env;
  const rs = env.config.model_registry.routing_strategy;
  const decide = (decision: RoutingInfo['decision'], reason: string) => (ctx.routing = { strategy: rs.type, decision, reason });
  const view = catalogue.family(family);
  if (!view.known) {
    decide('routed', 'catalogue_empty');
    return routable;
  }
  const serving = catalogue.servedBy(family, model);
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
    const embedding = catalogue.traitsOf(env.profile!, model).embedding;
    const compatible = routable.filter((e) => {
      const list = catalogue.listOf(e);
      return !list || list.length === 0 || view.models.some((m) => m.endpoints.includes(e) && m.embedding === embedding);
    });
    if (compatible.length) {
      decide('fallback', 'fallback_compatible');
      return compatible;
    }
    decide('rejected', 'no_compatible_endpoint');
    throw gwError('MODEL_NOT_FOUND', { model, provider: family, hint: 'no compatible endpoint is routable (model_registry.routing_strategy.options.fallback_behavior: compatible_only)' });
  }
  if (serving.length) {
    decide('rejected', 'model_unavailable');
    throw gwError('MODEL_UNAVAILABLE', { model, provider: family, endpoints: serving.map((e) => e.name).join(', ') });
  }
  decide('rejected', 'model_not_found');
  throw gwError('MODEL_NOT_FOUND', { model, provider: family, hint: `GET /gw/models?provider=${family} lists what is served` });
}

interface Options { strategy?: string; model_routing: boolean }

export default definePlugin<Options>({
  name: 'select-endpoint',
  needsProfile: true,
  schema: {
    type: 'object', additionalProperties: false,
    properties: {
      strategy: { enum: Object.keys(STRATEGIES), description: 'Default: proxy.load_balancer' },
      model_routing: { type: 'boolean', default: true, description: 'Route by the body model through the catalogue' },
    },
  },
  apply(hooks, o, env) {
    const family = env.profile!.name;
    const order = STRATEGIES[o.strategy ?? env.config.proxy.load_balancer]();
    const { endpoints, discovery } = env;
    const rs = env.config.model_registry.routing_strategy;
    const refreshTimeoutMs = parseDuration(rs.options.discovery_timeout);

    const finish = (ctx: Context, list: readonly Endpoint[]) => {
      // Busy and Warming endpoints take reduced traffic: only after every Healthy one.
      let degraded = 0;
      for (const e of list) if (e.state !== 'healthy') degraded++;
      ctx.candidates = (degraded === 0 || degraded === list.length
        ? order(list)
        : [...order(list.filter((e) => e.state === 'healthy')), ...order(list.filter((e) => e.state !== 'healthy'))]) as Endpoint[];
    };

    hooks.request.tapPromise('select-endpoint', async (ctx) => {
      const routable = endpoints.routable(family);
      if (routable.length === 0) {
        const configured = endpoints.endpoints(family).length;
        throw gwError('ENDPOINT_UNAVAILABLE', { provider: family, reason: configured ? `${configured} configured, none routable` : 'no endpoint of this family is configured' });
      }
      const aliasTargets = ctx.routing?.aliasTargets;
      if (aliasTargets) return finish(ctx, routable.filter((e) => aliasTargets.has(e)));
      const model = o.model_routing ? ctx.bodyModel() : undefined;
      if (!model) return finish(ctx, routable);
      let list = modelCandidates(ctx, env, routable, model, false);
      if (list === 'refresh') {
        await Promise.race([discovery.refresh(routable), new Promise((r) => setTimeout(r, refreshTimeoutMs).unref())]);
        list = modelCandidates(ctx, env, endpoints.routable(family), model, true) as readonly Endpoint[];
      }
      finish(ctx, list);
    });
  },
});
