// Endpoint selection as a pipeline step: the request's route plan, written here once, by the
// selector (routing/endpoint-selector.ts: which endpoints, in which order, and the last resort).
import { definePlugin } from '../engine/api.js';
import { STRATEGIES } from './routing/balancing.js';
import { EndpointSelector, type SelectorOptions } from './routing/endpoint-selector.js';
import { UNAVAILABLE_OPTION } from './routing/model-routing.js';

export { STRATEGIES } from './routing/balancing.js';

export default definePlugin<SelectorOptions>({
  name: 'select-endpoint',
  needs: (o) => (o.model_routing ? ['body'] : []),
  uses: ['aliases'],
  provides: ['candidates'],
  schema: {
    type: 'object',
    additionalProperties: false,
    properties: {
      strategy: { enum: Object.keys(STRATEGIES), description: 'Default: proxy.load_balancer' },
      affinity: { type: 'boolean', description: 'Conversation affinity on this route. Default: proxy.affinity.enabled' },
      model_routing: {
        type: 'boolean',
        default: true,
        description: 'Route by the body model through the catalogue (and model-less requests by what the route needs)',
      },
      unavailable: UNAVAILABLE_OPTION,
      by_route: {
        type: 'boolean',
        default: false,
        description:
          "Only endpoints whose family serves the request's OpenAI route (engine/core/family-paths.ts); a model served only by families without it is 404 ROUTE_NOT_SERVED (/gw/openai/v1)",
      },
      also_via: {
        type: 'array',
        items: { type: 'string', pattern: '^/' },
        default: [],
        description:
          'With by_route: a family that serves one of these routes serves the request too, because the terminal step translates to it (/gw/openai/v1/responses: [/v1/chat/completions])',
      },
    },
  },
  apply(hooks, o, env) {
    const selector = new EndpointSelector(env, o);
    hooks.request.tapPromise('select-endpoint', async (ctx) => {
      const selected = selector.select(ctx);
      const { plan, error } = selected instanceof Promise ? await selected : selected;
      ctx.setPlan(plan);
      if (error) throw error;
    });
  },
});
