// Where a family's engine serves an OpenAI route (/v1/chat/completions, /v1/responses…), for the
// routes that reach every family (/gw/openai/v1): the route itself when the profile lists it
// (api.paths), else the listed path that ends with it (Docker Model Runner's /engines/v1/…), else
// for chat and completions the profile's parsing_rules paths (the NPU server's /api/v1/…);
// undefined when the engine has no such route. Worked out once per family and route.
import type { Profile } from './profiles.js';

const cache = new WeakMap<Profile, Map<string, string | undefined>>();

export function familyPath(profile: Profile, route: string): string | undefined {
  let routes = cache.get(profile);
  if (!routes) cache.set(profile, (routes = new Map()));
  if (routes.has(route)) return routes.get(route);
  const paths = profile.api.paths;
  let found = paths.includes(route) ? route : paths.find((p) => p.endsWith(route));
  const rules = profile.request.parsing_rules;
  if (found === undefined && route === '/v1/chat/completions') found = rules?.chat_completions_path;
  if (found === undefined && route === '/v1/completions') found = rules?.completions_path;
  if (routes.size < 64) routes.set(route, found); // a wildcard mount must not grow it without end
  return found;
}
