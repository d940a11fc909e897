// Read a messages-API request as far as every mode needs: a JSON object naming a model (for
// routing). Nothing else is checked here: a backend that speaks the messages API judges its own
// input (clients add fields, block types and roles over time, and a gateway that refuses them
// breaks those clients), and the translate step checks what translation reads, per endpoint.
import { gwError } from '../engine/kernel/errors.js';
import { definePlugin } from '../engine/kernel/plugin.js';

export default definePlugin<Record<string, never>>({
  name: 'msgapi-parse',
  needs: ['body'],
  provides: ['messages-request'],
  schema: { type: 'object', additionalProperties: false },
  apply(hooks) {
    hooks.request.tap('msgapi-parse', (ctx) => {
      const body = ctx.bodyJson();
      if (body === undefined) throw gwError('INVALID_JSON', { reason: ctx.body?.length ? 'it does not parse' : 'the body is empty' });
      if (typeof body !== 'object' || body === null || Array.isArray(body)) throw gwError('BAD_REQUEST', { reason: 'the body must be a JSON object' });
      const model = (body as { model?: unknown }).model;
      if (typeof model !== 'string' || !model) throw gwError('BAD_REQUEST', { reason: 'model: a model name is required' });
    });
  },
});
