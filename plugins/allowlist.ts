// The family's path allowlist (profile api.paths): exact paths, and named segments such as
// /v1/models/{model...} (engine/core/path-patterns.ts), compiled at load. A refused path never reaches a
// backend: 404 when the path is not listed, 501 for paths the profile marks unsupported.
import { definePlugin, gwError, PathSet } from '../engine/api.js';

interface Options {
  status: 404 | 501;
}

export default definePlugin<Options>({
  name: 'allowlist',
  needs: ['path'],
  needsProfile: true,
  schema: {
    type: 'object',
    additionalProperties: false,
    properties: { status: { enum: [404, 501], default: 404, description: 'Status for a path that is not listed' } },
  },
  apply(hooks, o, env) {
    const profile = env.profile!;
    const allowed = new PathSet(profile.api.paths);
    const unsupported = new Set(profile.api.unsupported_paths);
    const forwardAll = profile.api.forward_all;
    const notListed = o.status === 501 ? 'PATH_NOT_SUPPORTED' : 'PATH_NOT_ALLOWED';
    hooks.request.tap('allowlist', (ctx) => {
      const path = ctx.pathname;
      if (unsupported.has(path)) throw gwError('PATH_NOT_SUPPORTED', { path, provider: profile.name });
      if (!forwardAll && !allowed.has(path)) throw gwError(notListed, { path, provider: profile.name });
    });
  },
});
