// Pick the order in which the family's routable endpoints are tried: the first gets the request,
// the rest are the failover path. Strategies: priority, round-robin, least-connections.
import type { Endpoint } from '../engine/endpoints.js';
import { gwError } from '../engine/errors.js';
import { definePlugin } from '../engine/plugin.js';

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

interface Options { strategy?: string }

export default definePlugin<Options>({
  name: 'select-endpoint',
  needsProfile: true,
  schema: {
    type: 'object', additionalProperties: false,
    properties: { strategy: { enum: Object.keys(STRATEGIES), description: 'Default: proxy.load_balancer' } },
  },
  apply(hooks, o, env) {
    const family = env.profile!.name;
    const order = STRATEGIES[o.strategy ?? env.config.proxy.load_balancer]();
    const endpoints = env.endpoints;
    hooks.request.tap('select-endpoint', (ctx) => {
      const routable = endpoints.routable(family);
      if (routable.length === 0) {
        const configured = endpoints.endpoints(family).length;
        throw gwError('ENDPOINT_UNAVAILABLE', { provider: family, reason: configured ? `${configured} configured, none routable` : 'no endpoint of this family is configured' });
      }
      // Busy and Warming endpoints take reduced traffic: only after every Healthy one.
      let degraded = 0;
      for (const e of routable) if (e.state !== 'healthy') degraded++;
      ctx.candidates = (degraded === 0 || degraded === routable.length
        ? order(routable)
        : [...order(routable.filter((e) => e.state === 'healthy')), ...order(routable.filter((e) => e.state !== 'healthy'))]) as Endpoint[];
    });
  },
});
