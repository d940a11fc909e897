// X-Gw-* headers on every response of the route: request id, endpoint, model, family, timing,
// the routing decision when model routing ran, and what conversation affinity did.
import { definePlugin, echo, formatDuration } from '../engine/api.js';
import { affinityOutcome } from './routing/affinity.js';

interface Options {
  model_header: boolean;
}

export default definePlugin<Options>({
  name: 'gateway-headers',
  schema: {
    type: 'object',
    additionalProperties: false,
    properties: { model_header: { type: 'boolean', default: true, description: "X-Gw-Model (reads the body's model when no step set one)" } },
  },
  apply(hooks, o, env) {
    const family = env.profile?.name;
    hooks.respond.tap('gateway-headers', (ctx) => {
      const h = ctx.replyHeaders;
      h.push('x-gw-request-id', ctx.id); // a caller's id is used only when it is plain and short
      const ep = ctx.endpoint;
      if (ep) h.push('x-gw-endpoint', ep.name);
      const model = o.model_header ? ctx.model : undefined;
      if (model) h.push('x-gw-model', echo(model)); // the client's words: encoded, cut to 256
      const type = ep?.family ?? family;
      if (type) h.push('x-gw-backend-type', type);
      h.push('x-gw-response-time', formatDuration(ctx.headMs));
      const attempts = ctx.attempt.count;
      if (attempts > 0) h.push('x-gw-attempts', String(attempts));
      const r = ctx.routing;
      if (r) h.push('x-gw-routing-strategy', r.strategy, 'x-gw-routing-decision', r.decision, 'x-gw-routing-reason', r.reason);
      const affinity = ctx.plan?.affinity;
      if (affinity) h.push('x-gw-affinity', affinityOutcome(affinity, ep));
    });
  },
});
