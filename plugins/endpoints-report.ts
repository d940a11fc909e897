// GET /internal/status/endpoints: health, traffic and circuit breaker of every endpoint.
import { definePlugin } from '../engine/api.js';
import { endpointDetail } from './reports/endpoint-view.js';
import { replyStatus } from './reports/status-json.js';

export default definePlugin<Record<string, never>>({
  name: 'endpoints-report',
  terminal: true,
  schema: { type: 'object', additionalProperties: false },
  apply(hooks, _o, env) {
    hooks.dispatch.tapPromise('endpoints-report', async (ctx) => {
      const stats = await env.hostStats();
      const endpoints = env.endpoints.all.map((ep) => endpointDetail(ep, stats));
      return replyStatus(ctx, {
        timestamp: new Date().toISOString(),
        total: endpoints.length,
        routable: endpoints.filter((e) => e.routable).length,
        endpoints,
      });
    });
  },
});
