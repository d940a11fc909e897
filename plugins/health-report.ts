// GET /internal/health: overall status and one record per endpoint (the liveness probe; the
// readiness one is /internal/ready). The
// verdict is /internal/status's, in the spec's words for this route (critical reads unhealthy).
import { definePlugin, formatDuration } from '../engine/api.js';
import { HEALTH_WORDS, healthRecord, verdict } from './reports/endpoint-view.js';
import { replyStatus } from './reports/status-json.js';

export default definePlugin<Record<string, never>>({
  name: 'health-report',
  terminal: true,
  schema: { type: 'object', additionalProperties: false },
  apply(hooks, _o, env) {
    hooks.dispatch.tap('health-report', (ctx) => {
      const all = env.endpoints.all;
      return replyStatus(ctx, {
        status: HEALTH_WORDS[verdict(env.stats, all)],
        timestamp: new Date().toISOString(),
        uptime: formatDuration(Date.now() - env.startedAt.getTime()),
        endpoints: all.map(healthRecord),
      });
    });
  },
});
