// Model aliases (config model_aliases): when the body's model is an alias, find the family's
// routable endpoints serving any of its real names (in the alias's order) and remember, per
// endpoint, the name to send; rewrite-model puts it in the body. Runs before the routing
// strategies; an alias wins over a real model of the same name. With no endpoint for any target
// the request is routed with the alias as an ordinary name, except in strict mode, where it is
// rejected.
import type { Endpoint } from '../engine/endpoints.js';
import { gwError } from '../engine/errors.js';
import { definePlugin } from '../engine/plugin.js';

export default definePlugin<Record<string, never>>({
  name: 'alias-resolve',
  needsProfile: true,
  schema: { type: 'object', additionalProperties: false },
  apply(hooks, _o, env) {
    const aliases = new Map(Object.entries(env.config.model_aliases));
    if (aliases.size === 0) return;
    const family = env.profile!.name;
    const strategy = env.config.model_registry.routing_strategy.type;
    const { catalogue, endpoints } = env;
    hooks.request.tap('alias-resolve', (ctx) => {
      const model = ctx.bodyModel();
      const targets = model ? aliases.get(model) : undefined;
      if (!targets || !catalogue.family(family).known) return;
      const aliasTargets = new Map<Endpoint, string>();
      for (const ep of endpoints.routable(family)) {
        const name = targets.find((t) => catalogue.servedBy(family, t).includes(ep));
        if (name) aliasTargets.set(ep, name);
      }
      if (aliasTargets.size > 0) {
        ctx.routing = { strategy, decision: 'routed', reason: 'alias', aliasTargets };
        return;
      }
      if (strategy !== 'strict') return; // the alias is routed as an ordinary name
      const down = [...new Set(targets.flatMap((t) => catalogue.servedBy(family, t)))];
      ctx.routing = { strategy, decision: 'rejected', reason: down.length ? 'alias_unavailable' : 'alias_not_found' };
      if (down.length) throw gwError('MODEL_UNAVAILABLE', { model, provider: family, endpoints: down.map((e) => e.name).join(', ') });
      throw gwError('MODEL_NOT_FOUND', { model, provider: family, hint: `alias targets ${targets.join(', ')} are not discovered on any endpoint` });
    });
  },
});
