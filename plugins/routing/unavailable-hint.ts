// What a 503 says to do when no backend can take a request: which endpoints are down, where they
// listen (the sanitised URL, as /internal/status/endpoints shows it: never credentials nor query)
// and what to start or configure — so a new setup's first refusal names the fix instead of only
// the family. The config file's path stays out: a client of the gateway need not learn the
// gateway's file system.
import { gwError, type Endpoint, type GatewayError, type PluginEnv, type Whom } from '../../engine/api.js';

/** Endpoints named in one message at most: a large fleet's refusal stays one readable line. */
const NAMED = 4;

/** Out of rotation by their health checks (Unhealthy, Offline): what a last resort may try. */
export const outOfRotation = (e: Endpoint): boolean => e.state === 'unhealthy' || e.state === 'offline';

/** Where endpoints are configured, for a message. */
const where = (source: string) => (source.startsWith('(') ? 'a config file (gw serve --config FILE, or GW_CONFIG)' : 'the config file');

const named = (eps: readonly Endpoint[], one: (e: Endpoint) => string): string =>
  eps.slice(0, NAMED).map(one).join(', ') + (eps.length > NAMED ? `, and ${eps.length - NAMED} more (/internal/status/endpoints)` : '');

/** "llama at http://127.0.0.1:8080 (offline: ECONNREFUSED), …" */
export const describeDown = (eps: readonly Endpoint[]): string =>
  named(eps, (e) => `${e.name} at ${e.url} (${e.state}${e.lastError ? `: ${e.lastError}` : ''})`);

/** The fix when configured endpoints are down: start them, or correct where they point. */
export function downHint(eps: readonly Endpoint[], source: string): string {
  const urls = [...new Set(eps.slice(0, NAMED).map((e) => e.url))];
  return `start the backend at ${urls.join(', ')}, or correct ${eps.length === 1 ? 'its url' : 'their urls'} under discovery.static.endpoints in ${where(source)}`;
}

/** The detail of a refusal when none of `configured` (retired ones left out) can take a request:
 *  each endpoint with its state, and the fix — start them, or add one when there is none. */
export function nothingRoutable(configured: readonly Endpoint[], source: string, provider?: string): { endpoints?: string; hint: string; down: Endpoint[] } {
  if (configured.length === 0) {
    return {
      hint: `add an endpoint${provider ? ` (type: ${provider}, url: where the backend listens)` : ''} under discovery.static.endpoints in ${where(source)}`,
      down: [],
    };
  }
  const down = configured.filter(outOfRotation);
  return { endpoints: describeDown(configured), hint: downHint(down.length ? down : configured, source), down };
}

/** The 503 when none of `configured` can take a request (a route's, a model list's): the endpoints
 *  with their states, and the fix; `down`: those a last resort may try. `who.provider`: the
 *  route's family, if it has one. */
export function noneRoutableError(who: Whom, configured: readonly Endpoint[], source: string): { error: GatewayError; down: Endpoint[] } {
  const { endpoints: listed, hint, down } = nothingRoutable(configured, source, who.provider);
  const reason = configured.length
    ? `${configured.length} configured, none routable: ${listed}`
    : `no endpoint ${who.provider ? 'of this family ' : ''}is configured`;
  return { error: gwError('ENDPOINT_UNAVAILABLE', { ...who, reason, hint }), down };
}

/** The 503 of a model list over every family (/gw/models, /gw/openai/v1/models…) while no endpoint
 *  is routable, or none is configured: what is configured, where it listens, what to start or add.
 *  An empty list would read as "no models" where the truth is "no backend". */
export function noEndpointsError(env: PluginEnv): GatewayError | null {
  if (env.endpoints.all.some((e) => e.routable)) return null;
  const { endpoints, hint } = nothingRoutable(
    env.endpoints.all.filter((e) => !e.retired),
    env.source,
  );
  return gwError('NO_ENDPOINTS', { endpoints, hint });
}
