// POST /internal/models/refresh: rediscover models from every healthy endpoint now.
import { definePlugin } from '../engine/api.js';

export default definePlugin<Record<string, never>>({
  name: 'models-refresh',
  terminal: true,
  schema: { type: 'object', additionalProperties: false },
  apply(hooks, _o, env) {
    hooks.dispatch.tapPromise('models-refresh', async (ctx) => {
      const results = await env.discovery.refresh();
      return ctx.replyJson(200, { refreshed: results.filter((r) => r.ok).length, failed: results.filter((r) => !r.ok).length, endpoints: results });
    });
  },
});
