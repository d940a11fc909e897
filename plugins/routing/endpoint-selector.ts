// Endpoint selection: a request's route plan (engine/routing/plan.ts) — the candidates in the
// order they are tried, each with the model name it is sent and why it is there; the first gets
// the request, the rest are the failover path. Which endpoints:
// - a model-management route (the profile's request.management_paths) goes to any routable
//   endpoint of the family: the model it names need not be listed anywhere yet;
// - when the body names a model, the routable endpoints serving it — of the route's family, or of
//   every family on routes that have none (families.ts) — and model_registry.routing_strategy
//   decides what happens when none does (model-routing.ts). When alias-resolve says the model is
//   an alias, the endpoints serving its real names; when it has fallbacks, theirs after its own
//   (fallback-chain.ts);
// - when it names none, on a generation or embedding route, the endpoints that list a model of
//   that kind (route-kinds.ts); on any other route, every routable endpoint.
// Then the order (balancing.ts): the balancing strategy, conversation affinity (a request naming
// a model goes to its conversation's endpoint among the equally preferred: affinity.ts,
// affinity-key.ts; what it did is noted on the plan), the Busy/Warming weights, capacity.
// When no routable endpoint serves the request, an endpoint out of rotation may (last-resort.ts).
import {
  parseDuration,
  PlanBuilder,
  planOf,
  rejectedPlan,
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
import { affinityKeys } from './affinity-key.js';
import { balancer, noteOf, STRATEGIES, type Order } from './balancing.js';
import { chainPlan, type ChainRouting } from './fallback-chain.js';
import { downIn, familiesOf, type Families } from './families.js';
import { lastResortOf, meanwhile } from './last-resort.js';
import { aliasChoice, continuable, modelChoice, type AliasCache, type Choice, type Unavailable } from './model-routing.js';
import { CapabilityRouter, routeKindsOf, type RouteKind } from './route-kinds.js';
import { RouteFilter } from './route-filter.js';
import { noneRoutableError } from './unavailable-hint.js';

/** select-endpoint's options (its schema says what each does). */
export interface SelectorOptions {
  strategy?: string;
  affinity?: boolean;
  model_routing: boolean;
  unavailable: Unavailable;
  by_route: boolean;
  also_via: string[];
}

/** What selection made of a request: its route plan, and the error the client gets when it was
 *  refused (the plan then records the rejection, for the reply's headers). When nothing of the
 *  family can take the request and there is no plan to record, select() throws the 503 instead. */
export interface Selection {
  plan: RoutePlan;
  error?: GatewayError;
}

type Names = (ctx: Context) => readonly string[];

export class EndpointSelector {
  private readonly families: Families;
  private readonly strategyName: string;
  private readonly affinityOn: boolean;
  private readonly order: Order;
  private readonly keyOf: ReturnType<typeof affinityKeys>;
  /** model_registry.routing_strategy.type, for the routing decisions. */
  private readonly strategy: string;
  private readonly refreshTimeoutMs: number;
  private readonly kinds: ReadonlyMap<string, RouteKind>;
  private readonly capabilities: CapabilityRouter | null;
  private readonly cache: AliasCache = new Map();
  private readonly chains: ChainRouting;
  /** by_route: which families serve which route; null without by_route. */
  private readonly route: RouteFilter | null;
  /** One object per decision and reason, made once (they are few) and shared by the plans. */
  private readonly decisions = new Map<string, RoutingInfo>();

  constructor(
    private readonly env: PluginEnv,
    private readonly o: SelectorOptions,
  ) {
    this.families = familiesOf(env);
    const shares = env.config.proxy.degraded_traffic;
    this.strategyName = o.strategy ?? env.config.proxy.load_balancer;
    const aff = env.config.proxy.affinity;
    this.affinityOn = o.affinity ?? aff.enabled;
    const residency = env.residency;
    const state = { cold: (ep: Endpoint, model: string) => residency?.isLoaded(ep, model) === false };
    this.order = balancer(STRATEGIES[this.strategyName](state), {
      state,
      shares: { busy: shares.busy_one_in, warming: shares.warming_one_in },
      maxLoadFactor: this.affinityOn ? aff.max_load_factor : null,
      byPriority: this.strategyName === 'priority',
      placements: env.placements,
    });
    this.keyOf = affinityKeys(aff.session_headers.map((h) => h.toLowerCase()));
    this.strategy = env.config.model_registry.routing_strategy.type;
    this.refreshTimeoutMs = parseDuration(env.config.model_registry.routing_strategy.options.discovery_timeout);
    this.kinds = routeKindsOf(env.profile);
    this.capabilities = env.profile && this.kinds.size > 0 ? new CapabilityRouter(env, env.profile.name) : null;
    this.route = o.by_route ? new RouteFilter(o.also_via) : null;
    this.chains = {
      env,
      families: this.families,
      cache: this.cache,
      order: this.order,
      routing: (decision, reason) => this.routing(decision, reason),
      affinity: (ctx, list, key, names) => this.affinity(ctx, list, key, names),
    };
  }

  /** The request's route plan, or its refusal: at once, but for a model the discovery strategy
   *  looks for first (model_registry.routing_strategy: discovery), which waits for the catalogue. */
  select(ctx: Context): Selection | Promise<Selection> {
    const { o, env } = this;
    if (this.route) {
      const refusal = this.routeNotServed(ctx);
      if (refusal) return { plan: rejectedPlan(this.routing('rejected', 'route_not_served'), ctx.requested?.requested ?? ctx.model), error: refusal };
    }
    const routable = this.routableFor(ctx);
    if (routable.length === 0) return this.noneRoutable(ctx);
    const kind = this.kinds.size > 0 ? this.kinds.get(ctx.pathname) : undefined;
    if (kind === 'management') return { plan: planOf(this.order(routable), this.routing('routed', 'model_management')) };
    // What alias-resolve made of the model: a chain (several names, or an ordered alias that
    // stands for another name), or an alias (its real names; kept without model routing too).
    const route = ctx.requested;
    if (route && o.model_routing && (route.groups.length > 1 || route.groups[0].name !== route.requested)) return this.chain(ctx, routable, route);
    const targets = route?.groups[0].targets;
    const alias = route && targets ? aliasChoice(env, this.families, routable, route.requested, targets, this.cache) : undefined;
    if (alias) return this.planned(ctx, alias, route!.requested);
    if (!o.model_routing) return { plan: planOf(this.order(routable), null) };
    const model = ctx.model;
    if (!model) {
      if (kind && this.capabilities) return this.planned(ctx, this.capabilities.choose(routable, kind));
      return { plan: planOf(this.order(routable), null) };
    }
    const c = modelChoice(env, this.families, routable, model, false);
    if (c === 'refresh') return this.afterRefresh(ctx, routable, model);
    return this.planned(ctx, c, model);
  }

  /** A model the catalogue does not know yet, looked for first (within discovery_timeout). */
  private async afterRefresh(ctx: Context, routable: readonly Endpoint[], model: string): Promise<Selection> {
    const { env } = this;
    await Promise.race([env.discovery.refresh(routable), new Promise((r) => setTimeout(r, this.refreshTimeoutMs).unref())]);
    return this.planned(ctx, modelChoice(env, this.families, this.families.routable(), model, true) as Choice, model);
  }

  /** The routable endpoints that may take the request (by_route: those whose family serves its route). */
  private routableFor(ctx: Context): readonly Endpoint[] {
    const routable = this.families.routable();
    return this.route ? routable.filter((e) => this.route!.serves(e, ctx.pathname)) : routable;
  }

  /** Nothing routable: go on without candidates (`unavailable: continue`), a last resort, or the
   *  503 naming every configured endpoint and the fix. */
  private noneRoutable(ctx: Context): Selection {
    if (this.o.unavailable === 'continue') return { plan: planOf([], null) };
    const last = this.lastResort(ctx, true);
    if (last) return { plan: last };
    const configured = this.families.configured().filter((e) => !e.retired);
    const { error, down } = noneRoutableError({ provider: this.env.profile?.name, model: ctx.model }, configured, this.env.source);
    throw meanwhile(error, down);
  }

  /** A fallback chain's plan; every name served only by endpoints out of rotation: a last resort. */
  private chain(ctx: Context, routable: readonly Endpoint[], route: ModelRoute): Selection {
    const plan = chainPlan(this.chains, routable, route, ctx, this.keyFor(ctx, routable, everyName));
    if ('candidates' in plan) return { plan };
    const down = plan.reason.endsWith('_unavailable');
    if (down && this.o.unavailable !== 'continue') {
      const last = this.lastResort(ctx, false);
      if (last) return { plan: last };
    }
    return {
      plan: rejectedPlan(this.routing('rejected', plan.reason), route.requested),
      error: down ? meanwhile(plan.error, this.downServing(ctx)) : plan.error,
    };
  }

  /** The plan for one name's choice; a rejection carries its error — or, `unavailable: continue`
   *  and the name served by endpoints down now, none (a plan without candidates). */
  private planned(ctx: Context, c: Choice, requested?: string): Selection {
    if (c.error) {
      // Served, but only by endpoints out of rotation: one of them is tried, if none is being.
      if (continuable(c) && this.o.unavailable !== 'continue') {
        const last = this.lastResort(ctx, false);
        if (last) return { plan: last };
      }
      const plan = rejectedPlan(this.routing(c.decision, c.reason), requested);
      if (this.o.unavailable === 'continue' && continuable(c)) return { plan };
      return { plan, error: continuable(c) ? meanwhile(c.error, this.downServing(ctx)) : c.error };
    }
    const real = c.realName;
    const key = this.keyFor(ctx, c.endpoints, firstNames);
    const ordered = this.order(c.endpoints, key, ctx.model);
    const note = key === undefined ? undefined : this.affinity(ctx, ordered, key, firstNames);
    if (!real) return { plan: planOf(ordered, this.routing(c.decision, c.reason), requested, 'requested', undefined, note) };
    const plan = new PlanBuilder();
    plan.add(0, ordered, (ep) => real.get(ep), 'alias');
    return { plan: plan.build(this.routing(c.decision, c.reason), requested, note) };
  }

  /** The last-resort plan, if an endpoint out of rotation ready for one (its breaker's test
   *  request) serves the request's first name it can; `anyEndpoint`: nothing of the family is
   *  routable, so one serving none of the names will do too. */
  private lastResort(ctx: Context, anyEndpoint: boolean): RoutePlan | null {
    const route = this.route;
    const down = downIn(this.families).filter((e) => e.breaker.lastResortReady && (!route || route.serves(e, ctx.pathname)));
    const { catalogue } = this.env;
    const hope = lastResortOf(down, namesOf(ctx), this.o.model_routing ? ctx.model : undefined, anyEndpoint, (e, name) =>
      catalogue.servedBy(e.family, name).includes(e),
    );
    return hope ? planOf([hope.ep], this.routing('routed', 'last_resort'), ctx.requested?.requested, 'last_resort', hope.model) : null;
  }

  /** by_route: the 404 for a request whose names are served only by families without its route. */
  private routeNotServed(ctx: Context): GatewayError | undefined {
    return this.route!.notServed(ctx.pathname, ctx.requested?.requested ?? ctx.model, namesOf(ctx), this.families.servedBy);
  }

  /** Out of rotation and serving one of the request's names. */
  private downServing(ctx: Context): Endpoint[] {
    return this.downServingNames(namesOf(ctx) ?? (ctx.model === undefined ? [] : [ctx.model]));
  }

  /** Out of rotation and serving one of `names` (nothing to look for while every endpoint is routable). */
  private downServingNames(names: readonly string[]): Endpoint[] {
    const f = this.families;
    if (names.length === 0 || f.routable().length === f.configuredCount()) return [];
    const { catalogue } = this.env;
    return downIn(f).filter((e) => names.some((n) => catalogue.servedBy(e.family, n).includes(e)));
  }

  /** Affinity's key for a request naming a model, when there is a choice to make: several
   *  candidates, or a home out of rotation among the endpoints serving `names` (what the request
   *  is placed by); undefined: affinity has no say (nor embeddings: nothing to keep cached). */
  private keyFor(ctx: Context, candidates: readonly Endpoint[], names: Names): AffinityKey | null | undefined {
    if (!this.affinityOn || !this.o.model_routing) return undefined;
    if (this.kinds.size > 0 && this.kinds.get(ctx.pathname) === 'embedding') return undefined;
    const model = ctx.requested?.requested ?? ctx.model;
    if (model === undefined) return undefined;
    if (candidates.length < 2 && this.downServingNames(names(ctx)).length === 0) return undefined;
    return this.keyOf(ctx, model);
  }

  /** What affinity did for the ordered candidates of `names`. */
  private affinity(ctx: Context, ordered: readonly Endpoint[], key: AffinityKey | null, names: Names): AffinityNote {
    return noteOf(key, ordered, key?.home ? this.downServingNames(names(ctx)) : [], this.strategyName === 'priority');
  }

  private routing(decision: RoutingInfo['decision'], reason: string): RoutingInfo {
    let r = this.decisions.get(reason);
    if (r === undefined || r.decision !== decision) this.decisions.set(reason, (r = Object.freeze({ strategy: this.strategy, decision, reason })));
    return r;
  }
}

/** The names the request stands for: an alias's real names and fallbacks; undefined: the body's model. */
const namesOf = (ctx: Context): readonly string[] | undefined => ctx.requested?.groups.flatMap((g) => g.targets ?? [g.name]);

/** Every name the request stands for (a chain's). */
const everyName: Names = (ctx) => namesOf(ctx) ?? [];

/** The names of the request's first group: an alias's real names, else the model. */
const firstNames: Names = (ctx) => {
  const g = ctx.requested?.groups[0];
  return g ? (g.targets ?? [g.name]) : ctx.model === undefined ? [] : [ctx.model];
};
