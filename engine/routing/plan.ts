// The route plan: where one request may go, decided once by endpoint selection (the
// select-endpoint step) and read by everything after it. One immutable object: the candidates in
// the order they are tried, each with its endpoint, the model name to send it and why it is
// there; where the fallback models begin; and the routing decision the reply headers report.
// Nothing else writes routing state: the attempt loop walks the plan and keeps what happened on
// the way in its own record (attempt-state.ts).
//
// Before it, alias-resolve may say what the request's model stands for (a ModelRoute: the names
// tried in turn, each a model or an alias of several real names); endpoint selection maps those
// names onto endpoints. A plan is typed read-only rather than frozen: one is made per request.
import type { Endpoint } from '../backends/endpoints.js';

/** Why a candidate is in the plan. */
export type Why =
  /** It serves the requested model, or the route names none and any endpoint of the family will do. */
  | 'requested'
  /** It serves one of the requested alias's real names. */
  | 'alias'
  /** It serves a fallback of the requested model (model_fallbacks, an ordered alias). */
  | 'fallback'
  /** Nothing of the family is routable: a failed endpoint gets the request as its last hope. */
  | 'last_resort';

export interface Candidate {
  readonly endpoint: Endpoint;
  /** The model name sent to it when routing chose one (an alias's real name, a fallback model);
   *  undefined: the body's, untouched. */
  readonly model: string | undefined;
  /** Which name of the request it serves: 0 the requested model or alias, 1… its fallbacks. */
  readonly group: number;
  readonly why: Why;
}

/** How routing decided (the X-Gw-Routing-* headers, metrics, the access log). */
export interface RoutingInfo {
  readonly strategy: string;
  readonly decision: 'routed' | 'fallback' | 'rejected';
  readonly reason: string;
}

/** What conversation affinity made of the request (plugins/routing/affinity.ts): the X-Gw-Affinity
 *  header, metrics and the access log read it with the endpoint that answered. */
export interface AffinityNote {
  /** Where the key came from (a header name, "conversation"); null: the request had none. */
  readonly source: string | null;
  /** The endpoint the key prefers; null without a key. */
  readonly home: Endpoint | null;
  /** Why the first candidate is another (overloaded, busy, offline…); null: it is home. */
  readonly moved: string | null;
}

export interface RoutePlan {
  readonly candidates: readonly Candidate[];
  /** Index of the first candidate serving a fallback model; candidates.length when none does. */
  readonly fallbackFrom: number;
  readonly routing: RoutingInfo | null;
  /** The requested name (a model or an alias), named when a fallback answers instead. */
  readonly requested: string | undefined;
  /** Set when affinity placed the request; absent when it was off or had no choice to make. */
  readonly affinity?: AffinityNote;
}

/** One name a request's model stands for: a model, or an alias whose real names any serving
 *  endpoint may take (`targets`). */
export interface NameGroup {
  readonly name: string;
  readonly targets: readonly string[] | null;
}

/** What alias-resolve makes of the body's model: the names tried in turn, the first being the
 *  requested model or alias, the rest its fallbacks. Compiled at load, shared by requests. */
export interface ModelRoute {
  readonly requested: string;
  readonly groups: readonly NameGroup[];
}

/** A plan in which every endpoint serves the same name. */
export function planOf(
  endpoints: readonly Endpoint[],
  routing: RoutingInfo | null,
  requested?: string,
  why: Why = 'requested',
  model?: string,
  affinity?: AffinityNote,
): RoutePlan {
  const candidates: Candidate[] = new Array(endpoints.length);
  for (let i = 0; i < endpoints.length; i++) candidates[i] = { endpoint: endpoints[i], model, group: 0, why };
  return affinity
    ? { candidates, fallbackFrom: candidates.length, routing, requested, affinity }
    : { candidates, fallbackFrom: candidates.length, routing, requested };
}

/** A refusal: no candidates, the decision (rejected) kept for the reply's headers. */
export const rejectedPlan = (routing: RoutingInfo, requested?: string): RoutePlan => ({ candidates: [], fallbackFrom: 0, routing, requested });

/** Lays a plan out group by group (a fallback chain). */
export class PlanBuilder {
  private readonly candidates: Candidate[] = [];
  private fallbackFrom = -1;

  get size(): number {
    return this.candidates.length;
  }

  /** The endpoints of one name, in the order they are tried; `modelOf` names what each is sent. */
  add(group: number, endpoints: readonly Endpoint[], modelOf: (ep: Endpoint) => string | undefined, why: Why): void {
    if (group > 0 && this.fallbackFrom < 0 && endpoints.length > 0) this.fallbackFrom = this.candidates.length;
    for (const endpoint of endpoints) this.candidates.push({ endpoint, model: modelOf(endpoint), group, why });
  }

  build(routing: RoutingInfo | null, requested: string | undefined, affinity?: AffinityNote): RoutePlan {
    const fallbackFrom = this.fallbackFrom < 0 ? this.candidates.length : this.fallbackFrom;
    return affinity
      ? { candidates: this.candidates, fallbackFrom, routing, requested, affinity }
      : { candidates: this.candidates, fallbackFrom, routing, requested };
  }
}

/** The plan narrowed to the candidates a terminal step can use (those that count tokens, say):
 *  the order, the models and the fallback boundary are kept. */
export function narrowed(plan: RoutePlan, keep: (c: Candidate) => boolean): RoutePlan {
  if (plan.candidates.every(keep)) return plan;
  const candidates = plan.candidates.filter(keep);
  const first = candidates.findIndex((c) => plan.candidates.indexOf(c) >= plan.fallbackFrom);
  return { ...plan, candidates, fallbackFrom: first < 0 ? candidates.length : first };
}
