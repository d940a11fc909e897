// select-endpoint's by_route (/gw/openai/v1): only endpoints whose family serves the request's
// OpenAI route — itself (engine/core/family-paths.ts) or through a translation the terminal step
// makes (`also_via`: /v1/responses reaches families with /v1/chat/completions) — take it; a model
// served only by families without the route is 404 ROUTE_NOT_SERVED rather than sent where it
// would fail.
import { familyPath, gwError, type Endpoint, type GatewayError, type Profile } from '../../engine/api.js';

/** A wildcard mount must not grow the cache without end: routes beyond this are worked out each time. */
const MAX_ROUTES = 64;

export class RouteFilter {
  /** Which families serve which route, worked out once a route and profile. */
  private readonly served = new Map<string, WeakMap<Profile, boolean>>();

  constructor(private readonly alsoVia: readonly string[]) {}

  /** Does the endpoint's family serve `pathname`, itself or through a translation? */
  serves(e: Endpoint, pathname: string): boolean {
    let byProfile = this.served.get(pathname);
    if (!byProfile) {
      byProfile = new WeakMap();
      if (this.served.size < MAX_ROUTES) this.served.set(pathname, byProfile);
    }
    let yes = byProfile.get(e.profile);
    if (yes === undefined)
      byProfile.set(e.profile, (yes = familyPath(e.profile, pathname) !== undefined || this.alsoVia.some((r) => familyPath(e.profile, r) !== undefined)));
    return yes;
  }

  /** The 404 for a request whose names are served, but only by families without its route (the
   *  first endpoint found serving one of them ends the search); undefined: nothing to refuse.
   *  `model`: what the client asked for; `names`: what it stands for (an alias's real names and
   *  fallbacks, else the model itself); `servingOf`: the endpoints listing a name. */
  notServed(
    pathname: string,
    model: string | undefined,
    names: readonly string[] | undefined,
    servingOf: (name: string) => readonly Endpoint[],
  ): GatewayError | undefined {
    if (model === undefined) return undefined;
    const all = names ?? [model];
    let any = false;
    for (const n of all) {
      for (const e of servingOf(n)) {
        if (this.serves(e, pathname)) return undefined;
        any = true;
      }
    }
    if (!any) return undefined;
    return gwError('ROUTE_NOT_SERVED', {
      model,
      path: pathname,
      families: [...new Set(all.flatMap((n) => servingOf(n).map((e) => e.family)))].join(', '),
      hint: `GET /gw/openai/v1/models lists the models; ${pathname} reaches those of families that serve it`,
    });
  }
}
