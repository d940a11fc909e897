// What a family's routes need, from its profile (request.generation_paths, embedding_paths,
// management_paths), compiled once when a step is applied:
// - a request that names no model goes to an endpoint that can serve it: one that lists an
//   embedding model for an embedding route, a generation model for a generation route (llama.cpp's
//   /completion must not land on an embeddings-only server, nor /embedding on a chat server);
// - a model-management route (pull, create, delete, load…) is routed by family, never by model:
//   the model it names is often one no endpoint lists yet.
import type { Endpoint, PluginEnv, Profile } from '../../engine/api.js';
import type { Choice } from './model-routing.js';

export type RouteKind = 'generation' | 'embedding' | 'management';

/** Path → kind for one family; paths in no list have none (routed as before). */
export function routeKindsOf(profile: Profile | undefined): ReadonlyMap<string, RouteKind> {
  const kinds = new Map<string, RouteKind>();
  if (!profile) return kinds;
  const r = profile.request;
  for (const p of r.generation_paths) kinds.set(p, 'generation');
  for (const p of r.embedding_paths) kinds.set(p, 'embedding');
  for (const p of r.management_paths) kinds.set(p, 'management');
  return kinds;
}

interface Split {
  catalogue: number;
  health: number;
  embedding: readonly Endpoint[];
  generation: readonly Endpoint[];
  /** Routable endpoints that list no model (none reported yet, or lazy loaders): they may load anything. */
  unknown: readonly Endpoint[];
}

/**
 * Candidates by capability for one family, rebuilt only when the catalogue or endpoint health
 * changed. Decision and reason (X-Gw-Routing-*):
 * - `capability_embedding` / `capability_generation`: the routable endpoints listing a model of that kind;
 * - `capability_unknown` (fallback): none does; the endpoints whose model list is empty or unknown;
 * - `no_capable_endpoint` (fallback): every routable endpoint; the backend answers.
 */
export class CapabilityRouter {
  private split: Split | null = null;

  constructor(
    private readonly env: PluginEnv,
    private readonly family: string,
  ) {}

  choose(routable: readonly Endpoint[], kind: 'embedding' | 'generation'): Choice {
    const s = this.current(routable);
    const capable = s[kind];
    if (capable.length) return { endpoints: capable, decision: 'routed', reason: `capability_${kind}` };
    if (s.unknown.length) return { endpoints: s.unknown, decision: 'fallback', reason: 'capability_unknown' };
    return { endpoints: routable, decision: 'fallback', reason: 'no_capable_endpoint' };
  }

  private current(routable: readonly Endpoint[]): Split {
    const { catalogue, endpoints } = this.env;
    const s = this.split;
    if (s && s.catalogue === catalogue.version && s.health === endpoints.version) return s;
    const embedding = new Set<Endpoint>();
    const generation = new Set<Endpoint>();
    for (const m of catalogue.family(this.family).models) for (const ep of m.endpoints) (m.embedding ? embedding : generation).add(ep);
    const listed = (e: Endpoint) => (catalogue.listOf(e)?.length ?? 0) > 0;
    return (this.split = {
      catalogue: catalogue.version,
      health: endpoints.version,
      embedding: routable.filter((e) => embedding.has(e)),
      generation: routable.filter((e) => generation.has(e)),
      unknown: routable.filter((e) => !listed(e)),
    });
  }
}
