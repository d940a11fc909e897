// The rate limits of server.rate_limits on every route (shared.yaml puts this step on all of
// them): the gateway's global bucket, and one bucket per client address — the per-IP limit, or
// on the health route the health limit and on the other internal routes the elevated internal
// limit in its place. A request without a token gets 429 RATE_LIMITED in the route's error format
// with Retry-After; every reply of a limited route carries X-RateLimit-Limit, -Remaining and
// -Reset of the bucket closest to empty. The per-endpoint limits (hosted families) are checked
// by the attempt loop as each candidate is tried (Endpoint.rateGate); the stats step counts their 429s.
import {
  definePlugin,
  GatewayError,
  gwError,
  nameMatches,
  rateLimitHeaders,
  type Context,
  type LimitScope,
  type Rate,
  type SharedTake,
  type Take,
  type TakeAnswer,
} from '../engine/api.js';
import { clientAddressOf } from './access/client-address.js';
import { tapTokens } from './access/take-tokens.js';

interface Options {
  health: string[];
  internal: string[];
}

const WHAT: Record<Exclude<LimitScope, 'endpoint'>, string> = {
  global: "the gateway's global limit (server.rate_limits.global_requests_per_minute)",
  ip: "your address's limit (server.rate_limits.per_ip_requests_per_minute)",
  health: "your address's limit on the health route (server.rate_limits.health_requests_per_minute)",
  internal: "your address's limit on the internal routes (server.rate_limits.internal_requests_per_minute)",
};

const BINDING = 'rate-limit';

/** One bucket per IPv4 address, and per IPv6 /64: a single host holds a whole /64 and could
 *  otherwise take a fresh bucket for every request. */
function bucketKey(address: string): string {
  if (address.indexOf(':') < 0) return address;
  const [head, tail = ''] = address.split('::', 2);
  const left = head ? head.split(':') : [];
  const right = tail ? tail.split(':') : [];
  const groups = address.includes('::') ? [...left, ...Array(Math.max(0, 8 - left.length - right.length)).fill('0'), ...right] : left;
  return `${groups
    .slice(0, 4)
    .map((g) => g.toLowerCase().replace(/^0+(?=.)/, ''))
    .join(':')}::/64`;
}

/** The bucket closest to empty speaks for the request (ties: the client's, taken first). */
const closest = (a: Take, b: Take): Take => (b.remaining < a.remaining ? b : a);

function refusal(scope: Exclude<LimitScope, 'endpoint'>, t: Take, burst: number): GatewayError {
  const retryAfter = Math.max(1, t.retryAfterS);
  return gwError('RATE_LIMITED', { what: WHAT[scope], limit: t.limit, burst, retryAfter }, ['retry-after', String(retryAfter), ...rateLimitHeaders(t)]);
}

export default definePlugin<Options>({
  name: 'rate-limit',
  schema: {
    type: 'object',
    additionalProperties: false,
    properties: {
      health: {
        type: 'array',
        items: { type: 'string' },
        default: ['internal-health', 'internal-ready'],
        description: 'Pipelines (globs) limited per address by health_requests_per_minute instead of per_ip_requests_per_minute',
      },
      internal: {
        type: 'array',
        items: { type: 'string' },
        default: ['internal-*'],
        description: 'Pipelines (globs) limited per address by internal_requests_per_minute instead of per_ip_requests_per_minute',
      },
    },
  },
  apply(hooks, o, env) {
    const limits = env.config.server.rate_limits;
    const matches = (globs: string[]) => globs.some((g) => nameMatches(g, env.pipeline));
    const scope = matches(o.health) ? 'health' : matches(o.internal) ? 'internal' : 'ip';
    const perClient = { health: limits.health_requests_per_minute, internal: limits.internal_requests_per_minute, ip: limits.per_ip_requests_per_minute }[
      scope
    ];
    const burst = limits.burst_size;
    // The health route has its own limit and is not charged to the global one: a flood of other
    // traffic must not make liveness probes (the container's HEALTHCHECK, an orchestrator) fail.
    const globalRate: Rate | null =
      limits.global_requests_per_minute > 0 && scope !== 'health' ? { perMinute: limits.global_requests_per_minute, burst } : null;
    const clientRate: Rate | null = perClient > 0 ? { perMinute: perClient, burst } : null;
    const counts = env.stats.rateLimited;
    // Limits off: no taps, no cost.
    if (!globalRate && !clientRate) return;
    const clientOf = clientAddressOf(limits);
    const globalTake: SharedTake | null = globalRate && { scope: 'global', key: '', rate: globalRate };
    /** The request's buckets: its client's, then the global one (all or none: a global refusal
     *  charges the client nothing). */
    const takesOf = (ctx: Context): SharedTake[] => {
      const takes: SharedTake[] = [];
      if (clientRate) takes.push({ scope, key: bucketKey(clientOf(ctx)), rate: clientRate });
      if (globalTake) takes.push(globalTake);
      return takes;
    };
    const settle = (ctx: Context, takes: readonly SharedTake[], answer: TakeAnswer): void => {
      if (answer.refused >= 0) {
        const which = takes[answer.refused].scope as typeof scope | 'global';
        counts[which]++;
        throw refusal(which, answer.takes[answer.refused], burst);
      }
      ctx.state[BINDING] = answer.takes.reduce(closest);
    };
    // In memory the take is answered at once and the step stays synchronous; shared (the fleet's
    // Redis, a worker's host) each take is a round trip, failing open.
    tapTokens(hooks, BINDING, env.buckets.takerFor(scope, limits), takesOf, settle);
    // On every other reply of the route (a 429 carries its own bucket's headers).
    hooks.respond.tap(BINDING, (ctx) => {
      const t = ctx.state[BINDING] as Take | undefined;
      if (!t || (ctx.error instanceof GatewayError && ctx.error.key === 'ENDPOINT_RATE_LIMITED')) return;
      ctx.replyHeaders.push(...rateLimitHeaders(t));
    });
  },
});
