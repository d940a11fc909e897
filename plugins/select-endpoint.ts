// Endpoint selection: the request's route plan (engine/routing/plan.ts), written here once — the
// candidates in the order they are tried, each with the model name it is sent and why it is
// there; the first gets the request, the rest are the failover path. Which endpoints:
// - a model-management route (the profile's request.management_paths) goes to any routable
//   endpoint of the family: the model it names need not be listed anywhere yet;
// - when the body names a model, the routable endpoints serving it — of the route's family, or of
//   every family on routes that have none (msgapi) — and model_registry.routing_strategy decides
//   what happens when none does. When alias-resolve says the model is an alias, the endpoints
//   serving its real names; when it has fallbacks, theirs after its own (lib/fallback-chain.ts);
// - when it names none, on a generation or embedding route, the endpoints that list a model of
//   that kind (lib/route-kinds.ts); on any other route, every routable endpoint.
// Then the order (lib/balancing.ts): the balancing strategy, the Busy/Warming weights, capacity.
// When no endpoint is routable, one that failed (Unhealthy, Offline) gets the request as a last
// resort — one such request at a time — rather than the client a 503 until the next health check:
// a backend that is back answers at once, as it would to a direct client, and its health is
// checked again at once.
import type { Endpoint } from '../engine/backends/endpoints.js';
import { parseDuration } from '../engine/core/duration.js';
import { gwError } from '../engine/core/errors.js';
import type { Context, RoutingInfo } from '../engine/kernel/context.js';
import { definePlugin } from '../engine/kernel/plugin.js';
import { PlanBuilder, planOf, rejectedPlan } from '../engine/routing/plan.js';
import { balancer, STRATEGIES } from './lib/balancing.js';
import { chainPlan, type ChainRouting } from './lib/fallback-chain.js';
import { aliasChoice, continuable, familiesOf, modelChoice, routableIn, UNAVAILABLE_OPTION, type AliasCache, type Choice, type Unavailable } from './lib/model-routing.js';
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
    const strategy = env.config.model_registry.routing_strategy.type;
    const refreshTimeoutMs = parseDuration(env.config.model_registry.routing_strategy.options.discovery_timeout);
    const kinds = routeKindsOf(env.profile);
    const capabilities = env.profile && kinds.size > 0 ? new CapabilityRouter(env, env.profile.name) : null;
    const cache: AliasCache = new Map();
    const chains: ChainRouting = { env, families, cache, order, routing: (decision, reason) => routing(decision, reason) };
    // One object per decision and reason, made once (they are few) and shared by the plans.
    const decisions = new Map<string, RoutingInfo>();
    const routing = (decision: RoutingInfo['decision'], reason: string): RoutingInfo => {
      let r = decisions.get(reason);
      if (r === undefined || r.decision !== decision) decisions.set(reason, (r = Object.freeze({ strategy, decision, reason })));
      return r;
    };

    /** The plan for one name's choice; a rejection is thrown, or — `unavailable: continue`, the
     *  name served by endpoints down now — a plan without candidates. */
    const planned = (ctx: Context, c: Choice, requested?: string): void => {
      if (c.error) {
        ctx.setPlan(rejectedPlan(routing(c.decision, c.reason), requested));
        if (o.unavailable === 'continue' && continuable(c)) return;
        throw c.error;
      }
      const real = c.realName;
      if (!real) return ctx.setPlan(planOf(order(c.endpoints), routing(c.decision, c.reason), requested));
      const plan = new PlanBuilder();
      plan.add(0, order(c.endpoints), (ep) => real.get(ep), 'alias');
      ctx.setPlan(plan.build(routing(c.decision, c.reason), requested));
    };

    /** A failed endpoint of the route's families, serving the model if one does, with no last-
     *  resort request in flight; sent the first name of the request's that it serves. */
    const lastResort = (ctx: Context): { ep: Endpoint; model: string | undefined } | undefined => {
      const down = families.flatMap((f) => endpoints.endpoints(f.name)).filter((e) => !e.retired && !e.trial && (e.state === 'unhealthy' || e.state === 'offline'));
      if (down.length === 0) return undefined;
      const model = o.model_routing ? ctx.model : undefined;
      const real = ctx.requested?.groups.flatMap((g) => g.targets ?? [g.name]);
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
        if (o.unavailable === 'continue') return ctx.setPlan(planOf([], null));
        const hope = lastResort(ctx);
        if (hope) {
          hope.ep.trial = true;
          trials.set(ctx, hope.ep);
          return ctx.setPlan(planOf([hope.ep], routing('routed', 'last_resort'), ctx.requested?.requested, 'last_resort', hope.model));
        }
        const configured = families.reduce((n, f) => n + endpoints.endpoints(f.name).length, 0);
        throw gwError('ENDPOINT_UNAVAILABLE', { provider, reason: configured ? `${configured} configured, none routable` : 'no endpoint of this family is configured' });
      }
      const kind = kinds.size > 0 ? kinds.get(ctx.pathname) : undefined;
      if (kind === 'management') return ctx.setPlan(planOf(order(routable), routing('routed', 'model_management')));
      // What alias-resolve made of the model: a chain (several names, or an ordered alias that
      // stands for another name), or an alias (its real names; kept without model routing too).
      const route = ctx.requested;
      if (route && o.model_routing && (route.groups.length > 1 || route.groups[0].name !== route.requested)) {
        const plan = chainPlan(chains, routable, route);
        if ('candidates' in plan) return ctx.setPlan(plan);
        ctx.setPlan(rejectedPlan(routing('rejected', plan.reason), route.requested));
        throw plan.error;
      }
      const targets = route?.groups[0].targets;
      const alias = route && targets ? aliasChoice(env, families, routable, route.requested, targets, cache) : undefined;
      if (alias) return planned(ctx, alias, route!.requested);
      if (!o.model_routing) return ctx.setPlan(planOf(order(routable), null));
      const model = ctx.model;
      if (!model) {
        if (kind && capabilities) return planned(ctx, capabilities.choose(routable, kind));
        return ctx.setPlan(planOf(order(routable), null));
      }
      let c = modelChoice(env, families, routable, model, false);
      if (c === 'refresh') {
        await Promise.race([discovery.refresh(routable), new Promise((r) => setTimeout(r, refreshTimeoutMs).unref())]);
        c = modelChoice(env, families, routableIn(env, families), model, true) as Choice;
      }
      planned(ctx, c, model);
    });
  },
});
