// What a 503 says to do when no backend can take a request: which endpoints are down, where they
// listen (the sanitised URL: never credentials nor query) and where they are configured — so a
// new setup's first refusal names the fix instead of only the family.
import type { Endpoint } from '../../engine/backends/endpoints.js';

/** Where the endpoints are configured, for a message: the config file, or how to give one. */
const where = (source: string) => (source.startsWith('(') ? 'a config file (gw serve --config FILE, or GW_CONFIG)' : source);

/** "llama at http://127.0.0.1:8080 (offline: ECONNREFUSED), …" */
export const describeDown = (eps: readonly Endpoint[]): string => eps.map((e) => `${e.name} at ${e.url} (${e.state}${e.lastError ? `: ${e.lastError}` : ''})`).join(', ');

/** The fix when configured endpoints are down: start them, or correct where they point. */
export function downHint(eps: readonly Endpoint[], source: string): string {
  const urls = [...new Set(eps.map((e) => e.url))];
  return `start the backend at ${urls.join(', ')}, or correct ${eps.length === 1 ? 'its url' : 'their urls'} under discovery.static.endpoints in ${where(source)}`;
}

/** The fix when a family has no endpoint at all. */
export const noEndpointHint = (provider: string | undefined, source: string): string =>
  `add an endpoint${provider ? ` (type: ${provider}, url: where the backend listens)` : ''} under discovery.static.endpoints in ${where(source)}`;
