// GET /internal/health: overall status and one record per endpoint.
import { formatDuration } from '../engine/duration.js';
import { definePlugin } from '../engine/plugin.js';
import { replyJson } from './lib/reply.js';

export default definePlugin<Record<string, never>>({
  name: 'health-report',
  terminal: true,
  schema: { type: 'object', additionalProperties: false },
  apply(hooks, _o, env) {
    hooks.dispatch.tap('health-report', (ctx) => {
      const all = env.endpoints.all;
      const routable = all.filter((e) => e.routable).length;
      const status = all.length > 0 && routable === all.length ? 'healthy' : routable > 0 ? 'degraded' : 'unhealthy';
      return replyJson(ctx, 200, {
        status,
        timestamp: new Date().toISOString(),
        uptime: formatDuration(Date.now() - env.startedAt.getTime()),
        endpoints: all.map((e) => ({
          name: e.name,
          url: `${e.origin}${e.basePath}`,
          status: e.routable ? 'healthy' : 'unhealthy',
          latency: formatDuration(e.lastLatencyMs),
          last_check: e.lastCheck?.toISOString() ?? null,
        })),
      });
    });
  },
});
