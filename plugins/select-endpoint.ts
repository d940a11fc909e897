// Choose the candidate endpoints and the order they are tried in: the first gets the request,
// the rest are the failover path. When the body names a model, candidates are the routable
// endpoints serving it — of the route's family, or of every family on routes that have none
// (msgapi) — and model_registry.routing_strategy decides what happens when none does; then the
// balancing strategy orders them: priority, round-robin, least-connections.
import type { Context } from '../engine/kernel/context.js';
import { parseDuration } from '../engine/kernel/duration.js';
import type { Endpoint } from '../engine/backends/endpoints.js';
import { gwError } from '../engine/kernel/errors.js';
import { definePlugin } from '../engine/kernel/plugin.js';
import { familiesOf, modelCandidates, routableIn } from './lib/model-routing.js';

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

interface Options { strategy?: string; model_routing: boolean }

export default definePlugin<Options>({
  name: 'select-endpoint',
  needs: (o) => (o.model_routing ? ['body'] : []),
  uses: ['aliases'],
  provides: ['candidates'],
  schema: {
    type: 'object', additionalProperties: false,
    properties: {
      strategy: { enum: Object.keys(STRATEGIES), description: 'Default: proxy.load_balancer' },
      model_routing: { type: 'boolean', default: true, description: 'Route by the body model through the catalogue' },
    },
  },
  apply(hooks, o, env) {
    const families = familiesOf(env);
    const provider = env.profile?.name ?? env.pipeline;
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
      const routable = routableIn(env, families);
      if (routable.length === 0) {
        const configured = families.reduce((n, f) => n + endpoints.endpoints(f.name).length, 0);
        throw gwError('ENDPOINT_UNAVAILABLE', { provider, reason: configured ? `${configured} configured, none routable` : 'no endpoint of this family is configured' });
      }
      const aliasTargets = ctx.routing?.aliasTargets;
      if (aliasTargets) return finish(ctx, routable.filter((e) => aliasTargets.has(e)));
      const model = o.model_routing ? ctx.model : undefined;
      if (!model) return finish(ctx, routable);
      let list = modelCandidates(ctx, env, families, routable, model, false);
      if (list === 'refresh') {
        await Promise.race([discovery.refresh(routable), new Promise((r) => setTimeout(r, refreshTimeoutMs).unref())]);
        list = modelCandidates(ctx, env, families, routableIn(env, families), model, true) as readonly Endpoint[];
      }
      finish(ctx, list);
    });
  },
});
