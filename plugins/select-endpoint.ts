// Endpoint selection: the request's route plan (engine/routing/plan.ts), written here once — the
// candidates in the order they are tried, each with the model name it is sent and why it is
// there; the first gets the request, the rest are the failover path. Which endpoints:
// - a model-management route (the profile's request.management_paths) goes to any routable
//   endpoint of the family: the model it names need not be listed anywhere yet;
// - when the body names a model, the routable endpoints serving it — of the route's family, or of
//   every family on routes that have none (msgapi) — and model_registry.routing_strategy decides
//   what happens when none does. When alias-resolve says the model is an alias, the endpoints
//   serving its real names; when it has fallbacks, theirs after its own (routing/fallback-chain.ts);
// - when it names none, on a generation or embedding route, the endpoints that list a model of
//   that kind (routing/route-kinds.ts); on any other route, every routable endpoint.
// Then the order (routing/balancing.ts): the balancing strategy, conversation affinity (a request
// naming a model goes to its conversation's endpoint among the equally preferred: routing/affinity.ts,
// routing/affinity-key.ts; what it did is noted on the plan), the Busy/Warming weights, capacity.
// When no routable endpoint serves the request — none of the family is routable, or the model's
// (or alias's) own endpoints are all out — one that failed (Unhealthy, Offline) and serves it gets
// the request as a last resort, rather than the client a 503 until its next health check, however
// far the backoff has grown: a backend that is back answers at once, as it would to a direct
// client, and is Healthy from that answer (backends/health.ts, markAnswered). One such request
// per endpoint at a time — it is the endpoint's breaker test request — and the next not before
// an initial breaker period after one failed; the others get the 503 meanwhile, with Retry-After.
// A failure leaves the endpoint's health as it was (its checks keep their schedule).
import { definePlugin, familyPath, GatewayError, gwError, parseDuration, PlanBuilder, planOf, rejectedPlan, type AffinityNote, type Context, type Endpoint, type Profile, type RoutingInfo } from '../engine/api.js';
import type { AffinityKey } from './routing/affinity.js';
import { affinityKeys } from './routing/affinity-key.js';
import { balancer, noteOf, STRATEGIES } from './routing/balancing.js';
import { chainPlan, type ChainRouting } from './routing/fallback-chain.js';
import { aliasChoice, continuable, familiesOf, modelChoice, routableIn, UNAVAILABLE_OPTION, type AliasCache, type Choice, type Unavailable } from './routing/model-routing.js';
import { CapabilityRouter, routeKindsOf } from './routing/route-kinds.js';
import { nothingRoutable, outOfRotation } from './routing/unavailable-hint.js';

export { STRATEGIES } from './routing/balancing.js';

interface Options { strategy?: string; affinity?: boolean; model_routing: boolean; unavailable: Unavailable; by_route: boolean; also_via: string[] }

export default definePlugin<Options>({
  name: 'select-endpoint',
  needs: (o) => (o.model_routing ? ['body'] : []),
  uses: ['aliases'],
  provides: ['candidates'],
  schema: {
    type: 'object', additionalProperties: false,
    properties: {
      strategy: { enum: Object.keys(STRATEGIES), description: 'Default: proxy.load_balancer' },
      affinity: { type: 'boolean', description: 'Conversation affinity on this route. Default: proxy.affinity.enabled' },
      model_routing: { type: 'boolean', default: true, description: 'Route by the body model through the catalogue (and model-less requests by what the route needs)' },
      unavailable: UNAVAILABLE_OPTION,
      by_route: { type: 'boolean', default: false, description: 'Only endpoints whose family serves the request\'s OpenAI route (engine/core/family-paths.ts); a model served only by families without it is 404 ROUTE_NOT_SERVED (/gw/openai/v1)' },
      also_via: { type: 'array', items: { type: 'string', pattern: '^/' }, default: [], description: 'With by_route: a family that serves one of these routes serves the request too, because the terminal step translates to it (/gw/openai/v1/responses: [/v1/chat/completions])' },
    },
  },
  apply(hooks, o, env) {
    const families = familiesOf(env);
    const provider = env.profile?.name ?? env.pipeline;
    const shares = env.config.proxy.degraded_traffic;
    const strategyName = o.strategy ?? env.config.proxy.load_balancer;
    const aff = env.config.proxy.affinity;
    const affinityOn = o.affinity ?? aff.enabled;
    const residency = env.residency;
    const state = { cold: (ep: Endpoint, model: string) => residency?.isLoaded(ep, model) === false };
    const order = balancer(STRATEGIES[strategyName](state), {
      state,
      shares: { busy: shares.busy_one_in, warming: shares.warming_one_in },
      maxLoadFactor: affinityOn ? aff.max_load_factor : null,
      byPriority: strategyName === 'priority',
    });
    const keyOf = affinityKeys(aff.session_headers.map((h) => h.toLowerCase()));
    const { endpoints, discovery, catalogue } = env;
    const strategy = env.config.model_registry.routing_strategy.type;
    const refreshTimeoutMs = parseDuration(env.config.model_registry.routing_strategy.options.discovery_timeout);
    const kinds = routeKindsOf(env.profile);
    const capabilities = env.profile && kinds.size > 0 ? new CapabilityRouter(env, env.profile.name) : null;
    const cache: AliasCache = new Map();
    const chains: ChainRouting = { env, families, cache, order, routing: (decision, reason) => routing(decision, reason), affinity: (ctx, list, key, names) => affinity(ctx, list, key, names) };
    // One object per decision and reason, made once (they are few) and shared by the plans.
    const decisions = new Map<string, RoutingInfo>();
    const routing = (decision: RoutingInfo['decision'], reason: string): RoutingInfo => {
      let r = decisions.get(reason);
      if (r === undefined || r.decision !== decision) decisions.set(reason, (r = Object.freeze({ strategy, decision, reason })));
      return r;
    };

    /** Affinity's key for a request naming a model, when there is a choice to make: several
     *  candidates, or a home out of rotation among the endpoints serving `names` (what the request
     *  is placed by); undefined: affinity has no say (nor embeddings: nothing to keep cached). */
    const keyFor = (ctx: Context, candidates: readonly Endpoint[], names: (ctx: Context) => readonly string[]): AffinityKey | null | undefined => {
      if (!affinityOn || !o.model_routing) return undefined;
      if (kinds.size > 0 && kinds.get(ctx.pathname) === 'embedding') return undefined;
      const model = ctx.requested?.requested ?? ctx.model;
      if (model === undefined) return undefined;
      if (candidates.length < 2 && downServingNames(names(ctx)).length === 0) return undefined;
      return keyOf(ctx, model);
    };
    /** What affinity did for the ordered candidates of `names`. */
    const affinity = (ctx: Context, ordered: readonly Endpoint[], key: AffinityKey | null, names: (ctx: Context) => readonly string[]): AffinityNote =>
      noteOf(key, ordered, key?.home ? downServingNames(names(ctx)) : [], strategyName === 'priority');
    /** Every name the request stands for (a chain's). */
    const everyName = (ctx: Context): readonly string[] => namesOf(ctx) ?? [];
    /** The names of the request's first group: an alias's real names, else the model. */
    const firstNames = (ctx: Context): readonly string[] => {
      const g = ctx.requested?.groups[0];
      return g ? (g.targets ?? [g.name]) : ctx.model === undefined ? [] : [ctx.model];
    };

    /** The plan for one name's choice; a rejection is thrown, or — `unavailable: continue`, the
     *  name served by endpoints down now — a plan without candidates. */
    const planned = (ctx: Context, c: Choice, requested?: string): void => {
      if (c.error) {
        // Served, but only by endpoints out of rotation: one of them is tried, if none is being.
        if (continuable(c) && o.unavailable !== 'continue' && lastResort(ctx, false)) return;
        ctx.setPlan(rejectedPlan(routing(c.decision, c.reason), requested));
        if (o.unavailable === 'continue' && continuable(c)) return;
        throw continuable(c) ? meanwhile(c.error, downServing(ctx)) : c.error;
      }
      const real = c.realName;
      const key = keyFor(ctx, c.endpoints, firstNames);
      const ordered = order(c.endpoints, key, ctx.model);
      const note = key === undefined ? undefined : affinity(ctx, ordered, key, firstNames);
      if (!real) return ctx.setPlan(planOf(ordered, routing(c.decision, c.reason), requested, 'requested', undefined, note));
      const plan = new PlanBuilder();
      plan.add(0, ordered, (ep) => real.get(ep), 'alias');
      ctx.setPlan(plan.build(routing(c.decision, c.reason), requested, note));
    };

    /** Endpoints of the route's families out of rotation by their health (Unhealthy, Offline). */
    const downInFamilies = (): Endpoint[] => families.flatMap((f) => endpoints.endpoints(f.name)).filter((e) => !e.retired && outOfRotation(e));
    /** The names the request stands for: an alias's real names and fallbacks; undefined: the body's model. */
    const namesOf = (ctx: Context): readonly string[] | undefined => ctx.requested?.groups.flatMap((g) => g.targets ?? [g.name]);
    /** Out of rotation and serving one of the request's names. */
    const downServing = (ctx: Context): Endpoint[] => downServingNames(namesOf(ctx) ?? (ctx.model === undefined ? [] : [ctx.model]));
    /** Out of rotation and serving one of `names` (nothing to look for while every endpoint is routable). */
    const downServingNames = (names: readonly string[]): Endpoint[] => {
      if (names.length === 0 || routableIn(env, families).length === configuredIn().length) return [];
      return downInFamilies().filter((e) => names.some((n) => catalogue.servedBy(e.family, n).includes(e)));
    };
    const configuredIn = (): readonly Endpoint[] => (families.length === 1 ? endpoints.endpoints(families[0].name) : endpoints.all);

    /** Sets the last-resort plan, if an endpoint out of rotation ready for one (breaker.ts) serves
     *  the request's first name it can (sent that name); `anyEndpoint`: nothing of the family is
     *  routable, so one serving none of the names will do too. */
    const lastResort = (ctx: Context, anyEndpoint: boolean): boolean => {
      const down = downInFamilies().filter((e) => e.breaker.lastResortReady && (!o.by_route || servesRoute(e, ctx)));
      if (down.length === 0) return false;
      const real = namesOf(ctx);
      const model = o.model_routing ? ctx.model : undefined;
      let hope: { ep: Endpoint; model: string | undefined } | undefined;
      for (const name of real ?? (model === undefined ? [] : [model])) {
        const ep = down.find((e) => catalogue.servedBy(e.family, name).includes(e));
        if (ep) {
          hope = { ep, model: real ? name : undefined };
          break;
        }
      }
      if (!hope && anyEndpoint) hope = { ep: down[0], model: real?.[0] };
      if (!hope) return false;
      ctx.setPlan(planOf([hope.ep], routing('routed', 'last_resort'), ctx.requested?.requested, 'last_resort', hope.model));
      return true;
    };

    /** The 503 while the endpoints that could take the request wait for their next last-resort
     *  request (one is out, or the last failed moments ago): Retry-After says when it goes. */
    const meanwhile = (err: GatewayError, down: readonly Endpoint[]): GatewayError => {
      if (down.length === 0 || down.some((e) => e.breaker.lastResortReady)) return err;
      const next = Math.min(...down.map((e) => e.breaker.lastResortAt));
      const s = String(Math.max(1, Math.ceil((next - Date.now()) / 1000)));
      const what = down.some((e) => e.breaker.testing) ? `a request is testing ${down.length === 1 ? 'it' : 'them'} now` : 'the last try failed moments ago';
      return new GatewayError(err.key, err.status, err.type, err.code, `${err.message}; ${what}: retry in ${s}s`, err.detail, ['retry-after', s]);
    };

    /** by_route: which families serve which of the pipeline's routes, worked out once a route and profile. */
    const served = new Map<string, WeakMap<Profile, boolean>>();
    /** by_route: does the endpoint's family serve the request's route, itself or through a translation? */
    const servesRoute = (e: Endpoint, ctx: Context): boolean => {
      let byProfile = served.get(ctx.pathname);
      if (!byProfile) {
        byProfile = new WeakMap();
        if (served.size < 64) served.set(ctx.pathname, byProfile); // a wildcard mount must not grow it without end
      }
      let yes = byProfile.get(e.profile);
      if (yes === undefined) byProfile.set(e.profile, (yes = familyPath(e.profile, ctx.pathname) !== undefined || o.also_via.some((r) => familyPath(e.profile, r) !== undefined)));
      return yes;
    };
    const servingOf = (n: string) => (families.length === 1 ? catalogue.servedBy(families[0].name, n) : catalogue.servedByAny(n));
    /** by_route: the 404 for a request whose names are served, but only by families without its
     *  route (the first endpoint found serving one of them ends the search). */
    const routeNotServed = (ctx: Context): GatewayError | undefined => {
      const model = ctx.requested?.requested ?? ctx.model;
      if (model === undefined) return undefined;
      const names = namesOf(ctx) ?? [model];
      let any = false;
      for (const n of names) {
        for (const e of servingOf(n)) {
          if (servesRoute(e, ctx)) return undefined;
          any = true;
        }
      }
      if (!any) return undefined;
      return gwError('ROUTE_NOT_SERVED', {
        model, path: ctx.pathname, families: [...new Set(names.flatMap((n) => servingOf(n).map((e) => e.family)))].join(', '),
        hint: `GET /gw/openai/v1/models lists the models; ${ctx.pathname} reaches those of families that serve it`,
      });
    };

    hooks.request.tapPromise('select-endpoint', async (ctx) => {
      if (o.by_route) {
        const refusal = routeNotServed(ctx);
        if (refusal) {
          ctx.setPlan(rejectedPlan(routing('rejected', 'route_not_served'), ctx.requested?.requested ?? ctx.model));
          throw refusal;
        }
      }
      const routable = o.by_route ? routableIn(env, families).filter((e) => servesRoute(e, ctx)) : routableIn(env, families);
      if (routable.length === 0) {
        if (o.unavailable === 'continue') return ctx.setPlan(planOf([], null));
        if (lastResort(ctx, true)) return;
        const configured = families.flatMap((f) => endpoints.endpoints(f.name)).filter((e) => !e.retired);
        const { endpoints: listed, hint, down } = nothingRoutable(configured, env.source, env.profile?.name);
        const reason = configured.length ? `${configured.length} configured, none routable: ${listed}` : 'no endpoint of this family is configured';
        throw meanwhile(gwError('ENDPOINT_UNAVAILABLE', { provider, reason, hint }), down);
      }
      const kind = kinds.size > 0 ? kinds.get(ctx.pathname) : undefined;
      if (kind === 'management') return ctx.setPlan(planOf(order(routable), routing('routed', 'model_management')));
      // What alias-resolve made of the model: a chain (several names, or an ordered alias that
      // stands for another name), or an alias (its real names; kept without model routing too).
      const route = ctx.requested;
      if (route && o.model_routing && (route.groups.length > 1 || route.groups[0].name !== route.requested)) {
        const plan = chainPlan(chains, routable, route, ctx, keyFor(ctx, routable, everyName));
        if ('candidates' in plan) return ctx.setPlan(plan);
        // Every name of the chain served only by endpoints out of rotation: one of them is tried.
        const down = plan.reason.endsWith('_unavailable');
        if (down && o.unavailable !== 'continue' && lastResort(ctx, false)) return;
        ctx.setPlan(rejectedPlan(routing('rejected', plan.reason), route.requested));
        throw down ? meanwhile(plan.error, downServing(ctx)) : plan.error;
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
