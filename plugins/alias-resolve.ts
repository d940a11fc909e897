// Model aliases (config model_aliases): when the body's model is an alias, find the routable
// endpoints serving any of its real names (in the alias's order) and remember, per endpoint,
// the name to send; rewrite-model puts it in the body. Runs before the routing strategies; an
// alias wins over a real model of the same name. With no endpoint for any target the request is
// routed with the alias as an ordinary name, except in strict mode, where it is rejected.
// Model-management routes (the profile's request.management_paths) are left alone: what they
// name is a model to pull, create or delete, not one to route to.
import { definePlugin } from '../engine/kernel/plugin.js';
import { modelNames } from './lib/model-chains.js';
import { familiesOf, resolveAlias, UNAVAILABLE_OPTION, type AliasCache, type Unavailable } from './lib/model-routing.js';

export default definePlugin<{ unavailable: Unavailable }>({
  name: 'alias-resolve',
  needs: ['body'],
  provides: ['aliases'],
  schema: { type: 'object', additionalProperties: false, properties: { unavailable: UNAVAILABLE_OPTION } },
  apply(hooks, o, env) {
    const aliases = modelNames(env.config).aliases;
    if (aliases.size === 0) return;
    const families = familiesOf(env);
    const cache: AliasCache = new Map();
    const management = new Set(env.profile?.request.management_paths);
    hooks.request.tap('alias-resolve', (ctx) => {
      if (management.size > 0 && management.has(ctx.pathname)) return;
      const model = ctx.model;
      const targets = model ? aliases.get(model) : undefined;
      if (model && targets) resolveAlias(ctx, env, families, model, targets, cache, o.unavailable);
    });
  },
});
