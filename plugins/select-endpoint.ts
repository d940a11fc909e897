// Choose the candidate endpoints and the order they are tried in: the first gets the request,
// the rest are the failover path. Which endpoints:
// - a model-management route (the profile's request.management_paths) goes to any routable
//   endpoint of the family: the model it names need not be listed anywhere yet;
// - when the body names a model, the routable endpoints serving it — of the route's family, or of
//   every family on routes that have none (msgapi) — and model_registry.routing_strategy decides
//   what happens when none does;
// - when it names none, on a generation or embedding route, the endpoints that list a model of
//   that kind (lib/route-kinds.ts); on any other route, every routable endpoint.
// Then the order (lib/balancing.ts): the balancing strategy, the Busy/Warming weights, capacity.
// When no endpoint is routable, one that failed (Unhealthy, Offline) gets the request as a last
// resort — one such request at a time — rather than the client a 503 until the next health check:
// a backend that is back answers at once, as it would to a direct client, and its health is
// checked again at once.
import type { Context } from '../engine/kernel/context.js';
import { parseDuration } from '../engine/core/duration.js';
import type { Endpoint } from '../engine/backends/endpoints.js';
import { gwError } from '../engine/core/errors.js';
import { definePlugin } from '../engine/kernel/plugin.js';
import { balancer, STRATEGIES } from './lib/balancing.js';
import { routeChain, type ChainRouting } from './lib/fallback-chain.js';
import { modelNames } from './lib/model-chains.js';
import { familiesOf, modelCandidates, routableIn, UNAVAILABLE_OPTION, type AliasCache, type Unavailable } from './lib/model-routing.js';
import { CapabilityRouter, routeKindsOf } from './lib/route-kinds.js';

export { STRATEGIES } from './lib/balancing.js';

interface Options { strategy?: string; model_routing: boolean; unavailable: Unavailable }

export default definePlugin<Options>({
  name: 'select-endpoint',
  needs: (o) => (o.model_routing ? ['body'] : []),
  uses: ['aliases'],
  provides: ['candidates'],
  schema: {
    type: 'object', additionalProperties: false,
    properties: {
      strategy: { enum: Object.keys(STRATEGIES), description: 'Default: proxy.load_balancer' },
      model_routing: { type: 'boolean', default: true, description: 'Route by the body model through the catalogue (and model-less requests by what the route needs)' },
      unavailable: UNAVAILABLE_OPTION,
    },
  },
  apply(hooks, o, env) {
    const families = familiesOf(env);
    const provider = env.profile?.name ?? env.pipeline;
    const shares = env.config.proxy.degraded_traffic;
    const order = balancer(STRATEGIES[o.strategy ?? env.config.proxy.load_balancer](), { busy: shares.busy_one_in, warming: shares.warming_one_in });
    const { endpoints, discovery, catalogue } = env;
    const strategy = env.config.model_registry.routing_strategy;
    const refreshTimeoutMs = parseDuration(strategy.options.discovery_timeout);
    const kinds = routeKindsOf(env.profile);
    const capabilities = env.profile && kinds.size > 0 ? new CapabilityRouter(env, env.profile.name) : null;

    const finish = (ctx: Context, list: readonly Endpoint[]) => {
      ctx.candidates = order(list);
    };
    const names = modelNames(env.config);
    const chains: ChainRouting = { env, families, aliases: names.aliases, cache: new Map() as AliasCache, order };

    /** A failed endpoint of the route's families, serving the model if one does, with no last-
     *  resort request in flight. */
    const lastResort = (ctx: Context): { ep: Endpoint; model: string | undefined } | undefined => {
      const down = families.flatMap((f) => endpoints.endpoints(f.name)).filter((e) => !e.retired && !e.trial && (e.state === 'unhealthy' || e.state === 'offline'));
      if (down.length === 0) return undefined;
      const model = o.model_routing ? ctx.model : undefined;
      // An alias or a chain: the first of its names an endpoint serves, sent in the body.
      const real = model === undefined ? undefined : names.all.get(model) ?? names.chains.get(model);
      for (const name of real ?? (model === undefined ? [] : [model])) {
        const ep = down.find((e) => catalogue.servedBy(e.family, name).includes(e));
        if (ep) return { ep, model: real ? name : undefined };
      }
      return { ep: down[0], model: real?.[0] };
    };
    // The last-resort request ended: the next may go; an answer means the backend is back.
    const trials = new WeakMap<Context, Endpoint>();
    hooks.done.tap('select-endpoint', (ctx) => {
      const ep = trials.get(ctx);
      if (!ep) return;
      ep.trial = false;
      if (ctx.status > 0 && ctx.status < 500 && !ep.routable) void env.health.check(ep);
    });

    hooks.request.tapPromise('select-endpoint', async (ctx) => {
      const routable = routableIn(env, families);
      if (routable.length === 0) {
        if (o.unavailable === 'continue') return finish(ctx, routable);
        const hope = lastResort(ctx);
        if (hope) {
          hope.ep.trial = true;
          trials.set(ctx, hope.ep);
          ctx.routing = { strategy: strategy.type, decision: 'routed', reason: 'last_resort' };
          finish(ctx, [hope.ep]);
          if (hope.model !== undefined) ctx.candidateModels = [hope.model];
          return;
        }
        const configured = families.reduce((n, f) => n + endpoints.endpoints(f.name).length, 0);
        throw gwError('ENDPOINT_UNAVAILABLE', { provider, reason: configured ? `${configured} configured, none routable` : 'no endpoint of this family is configured' });
      }
      const kind = kinds.size > 0 ? kinds.get(ctx.pathname) : undefined;
      if (kind === 'management') {
        ctx.routing = { strategy: strategy.type, decision: 'routed', reason: 'model_management' };
        return finish(ctx, routable);
      }
      const model = o.model_routing ? ctx.model : undefined;
      const chain = model !== undefined && names.chains.size > 0 ? names.chains.get(model) : undefined;
      if (chain) return routeChain(ctx, chains, routable, chain);
      const aliasTargets = ctx.routing?.aliasTargets;
      if (aliasTargets) {
        finish(ctx, routable.filter((e) => aliasTargets.has(e)));
        ctx.candidateModels = ctx.candidates.map((e) => aliasTargets.get(e));
        return;
      }
      if (!o.model_routing) return finish(ctx, routable);
      if (!model) return finish(ctx, kind && capabilities ? capabilities.candidates(ctx, routable, kind) : routable);
      let list = modelCandidates(ctx, env, families, routable, model, false, o.unavailable);
      if (list === 'refresh') {
        await Promise.race([discovery.refresh(routable), new Promise((r) => setTimeout(r, refreshTimeoutMs).unref())]);
        list = modelCandidates(ctx, env, families, routableIn(env, families), model, true, o.unavailable) as readonly Endpoint[];
      }
      finish(ctx, list);
    });
  },
});
