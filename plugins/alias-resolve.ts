// What the body's model stands for, by the config's virtual names (routing/model-chains.ts, compiled
// once): an alias (model_aliases) is its real names, any endpoint serving one takes the request;
// a model with fallbacks (model_fallbacks, an ordered alias) is the names tried in turn. The
// result (ctx.requested) is read by select-endpoint, which maps the names onto endpoints in the
// route plan; without this step a route takes the body's model as it is — no aliases, no
// fallbacks. An alias wins over a real model of the same name. Model-management routes (the
// profile's request.management_paths) are left alone: what they name is a model to pull, create
// or delete, not one to route to.
import { definePlugin } from '../engine/api.js';
import { modelNames } from './routing/model-chains.js';
import { UNAVAILABLE_OPTION } from './routing/model-routing.js';

export default definePlugin<{ unavailable?: string }>({
  name: 'alias-resolve',
  needs: ['body'],
  provides: ['aliases'],
  schema: {
    type: 'object',
    additionalProperties: false,
    properties: {
      // Pipelines written for earlier versions set it here; select-endpoint's option decides now.
      unavailable: {
        ...UNAVAILABLE_OPTION,
        default: undefined,
        description: 'Ignored: set it on select-endpoint, which rejects an alias nothing can serve now',
      },
    },
  },
  apply(hooks, _o, env) {
    const { routes } = modelNames(env.config);
    if (routes.size === 0) return;
    const management = new Set(env.profile?.request.management_paths);
    hooks.request.tap('alias-resolve', (ctx) => {
      if (management.size > 0 && management.has(ctx.pathname)) return;
      const model = ctx.model;
      if (model !== undefined) ctx.requested = routes.get(model) ?? null;
    });
  },
});
