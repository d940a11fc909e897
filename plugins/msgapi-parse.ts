// Read a messages-API request as far as every mode needs: a JSON object naming a model (for
// routing). Nothing else is checked here: a backend that speaks the messages API judges its own
// input (clients add fields, block types and roles over time, and a gateway that refuses them
// breaks those clients), and the translate step checks what translation reads, per endpoint.
// One bound protects the gateway itself: a body nested deeper than max_depth is refused before
// any code walks it (the checks, the estimate and re-serialising recurse per level).
import { definePlugin, gwError } from '../engine/api.js';
import { nestsDeeperThan } from './lib/json-depth.js';

export default definePlugin<{ max_depth: number }>({
  name: 'msgapi-parse',
  needs: ['body'],
  provides: ['messages-request'],
  schema: {
    type: 'object',
    additionalProperties: false,
    properties: {
      max_depth: {
        type: 'integer',
        minimum: 1,
        maximum: 1000,
        default: 256,
        description: 'Deepest nesting of arrays and objects a body may have (tool inputs and schemas included); a deeper one gets 400',
      },
    },
  },
  apply(hooks, o) {
    const maxDepth = o.max_depth;
    hooks.request.tap('msgapi-parse', (ctx) => {
      const body = ctx.bodyJson();
      if (body === undefined) throw gwError('INVALID_JSON', { reason: ctx.body?.length ? 'it does not parse' : 'the body is empty' });
      if (nestsDeeperThan(ctx.body!, maxDepth))
        throw gwError('BAD_REQUEST', { reason: `the body nests arrays and objects more than ${maxDepth} levels deep (the msgapi-parse step's max_depth)` });
      if (typeof body !== 'object' || body === null || Array.isArray(body)) throw gwError('BAD_REQUEST', { reason: 'the body must be a JSON object' });
      const model = (body as { model?: unknown }).model;
      if (typeof model !== 'string' || !model) throw gwError('BAD_REQUEST', { reason: 'model: a model name is required' });
    });
  },
});
