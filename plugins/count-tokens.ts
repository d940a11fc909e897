// POST /gw/msgapi/v1/messages/count_tokens: no model runs; the spec's estimate (characters / 4).
import { definePlugin } from '../engine/kernel/plugin.js';
import { estimateInputTokens } from './lib/msgapi/request.js';
import type { MessagesRequest } from './lib/msgapi/types.js';

export default definePlugin<Record<string, never>>({
  name: 'count-tokens',
  needs: ['messages-request'],
  terminal: true,
  schema: { type: 'object', additionalProperties: false },
  apply(hooks) {
    hooks.dispatch.tap('count-tokens', (ctx) => {
      const input = estimateInputTokens(ctx.bodyJson() as MessagesRequest);
      return ctx.replyJson(200, { input_tokens: input, output_tokens: 0, total_tokens: input });
    });
  },
});
