// Read the messages request: JSON with a model, messages and max_tokens. Fields the translator
// does not know are ignored, not rejected (clients add fields over time).
import { gwError } from '../engine/kernel/errors.js';
import { definePlugin } from '../engine/kernel/plugin.js';
import { invalidReason } from './lib/msgapi/request.js';

interface Options { max_tokens_required: boolean }

export default definePlugin<Options>({
  name: 'msgapi-parse',
  needs: ['body'],
  provides: ['messages-request'],
  schema: {
    type: 'object', additionalProperties: false,
    properties: { max_tokens_required: { type: 'boolean', default: true, description: 'count_tokens requests carry no max_tokens' } },
  },
  apply(hooks, o) {
    hooks.request.tap('msgapi-parse', (ctx) => {
      const body = ctx.bodyJson();
      if (body === undefined) throw gwError('INVALID_JSON', { reason: ctx.body?.length ? 'it does not parse' : 'the body is empty' });
      const why = invalidReason(body, o.max_tokens_required);
      if (why) throw gwError('BAD_REQUEST', { reason: why });
    });
  },
});
