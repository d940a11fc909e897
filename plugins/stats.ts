// Count the finished request against its endpoint and model for the status routes.
import { definePlugin } from '../engine/plugin.js';

export default definePlugin<Record<string, never>>({
  name: 'stats',
  schema: { type: 'object', additionalProperties: false },
  apply(hooks, _o, env) {
    const stats = env.stats;
    hooks.done.tap('stats', (ctx) => {
      stats.record(ctx.endpoint, ctx.elapsedMs(), ctx.status >= 500, ctx.model ?? ctx.bodyModel());
    });
  },
});
