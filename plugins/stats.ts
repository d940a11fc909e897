// Count the finished request against its endpoint and model for the status routes.
import { definePlugin } from '../engine/kernel/plugin.js';

interface Options { per_model: boolean }

export default definePlugin<Options>({
  name: 'stats',
  schema: {
    type: 'object', additionalProperties: false,
    properties: { per_model: { type: 'boolean', default: true, description: 'Count per model too (reads the body\'s model when no step set one)' } },
  },
  apply(hooks, o, env) {
    const stats = env.stats;
    hooks.done.tap('stats', (ctx) => {
      // A stream that broke after its 200 head is an upstream failure too.
      const failed = ctx.status >= 500 || ctx.brokeOff;
      stats.record(ctx.endpoint, ctx.totalMs, failed, o.per_model ? ctx.model : undefined);
    });
  },
});
