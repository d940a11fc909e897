// X-Gw-* headers on every response of the route: request id, endpoint, model, family, timing,
// and the routing decision when model routing ran.
import { formatDuration } from '../engine/duration.js';
import { definePlugin } from '../engine/plugin.js';

export default definePlugin<Record<string, never>>({
  name: 'gateway-headers',
  schema: { type: 'object', additionalProperties: false },
  apply(hooks, _o, env) {
    const family = env.profile?.name;
    hooks.respond.tap('gateway-headers', (ctx) => {
      const h = ctx.replyHeaders;
      h.push('x-gw-request-id', ctx.id);
      const ep = ctx.endpoint;
      if (ep) h.push('x-gw-endpoint', ep.name);
      const model = ctx.model ?? ctx.bodyModel();
      if (model) h.push('x-gw-model', model);
      const type = ep?.family ?? family;
      if (type) h.push('x-gw-backend-type', type);
      h.push('x-gw-response-time', formatDuration(ctx.elapsedMs()));
      const r = ctx.routing;
      if (r) h.push('x-gw-routing-strategy', r.strategy, 'x-gw-routing-decision', r.decision, 'x-gw-routing-reason', r.reason);
    });
  },
});
