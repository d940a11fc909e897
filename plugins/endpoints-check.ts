// POST /internal/endpoints/check: the endpoints' health checks run now (?endpoint=NAME: that one
// only, 404 for a name no endpoint has), answered with what each found — an operator who has just
// restarted an engine need not wait for its next scheduled check. With workers the host checks, and
// the answer is what this worker knows when it was asked (the results reach it a moment later).
import { definePlugin, gwError } from '../engine/api.js';
import { queryOf } from './lib/query.js';

export default definePlugin<Record<string, never>>({
  name: 'endpoints-check',
  terminal: true,
  schema: { type: 'object', additionalProperties: false },
  apply(hooks, _o, env) {
    hooks.dispatch.tapPromise('endpoints-check', async (ctx) => {
      const only = queryOf(ctx).get('endpoint') ?? undefined;
      const endpoints = env.endpoints.all.filter((ep) => only === undefined || ep.name === only);
      if (only !== undefined && endpoints.length === 0) throw gwError('ROUTE_NOT_FOUND', { method: ctx.method, path: `${ctx.requestPath}?endpoint=${only}` });
      await Promise.all(endpoints.map((ep) => env.health.check(ep)));
      return ctx.replyJson(200, {
        checked: endpoints.map((ep) => ({
          name: ep.name,
          status: ep.state,
          routable: ep.routable,
          latency_ms: Math.round(ep.lastLatencyMs * 10) / 10,
          error: ep.lastError || null,
        })),
      });
    });
  },
});
