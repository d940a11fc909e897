// GET /internal/stats/models: requests per model, and each catalogue model's availability across
// its endpoints (how many serve it, by status, with their last check latency).
import { definePlugin, formatDuration } from '../engine/api.js';
import { averageLatency, percent } from './reports/endpoint-view.js';

export default definePlugin<Record<string, never>>({
  name: 'model-stats-report',
  terminal: true,
  schema: { type: 'object', additionalProperties: false },
  apply(hooks, _o, env) {
    const { catalogue } = env;
    hooks.dispatch.tapPromise('model-stats-report', async (ctx) => {
      const stats = await env.hostStats();
      const names = new Set<string>([...catalogue.all().map((m) => m.id), ...stats.perModel.keys()]);
      const byId = new Map(catalogue.all().map((m) => [m.id, m]));
      const models = [...names].sort().map((name) => {
        const c = stats.perModel.get(name) ?? { requests: 0, errors: 0, totalLatencyMs: 0 };
        const m = byId.get(name);
        const eps = m?.endpoints ?? [];
        const byStatus: Record<string, number> = {};
        for (const e of eps) byStatus[e.state] = (byStatus[e.state] ?? 0) + 1;
        const routable = eps.filter((e) => e.routable).length;
        return {
          model: name,
          provider: m?.family ?? null,
          requests: c.requests,
          errors: c.errors,
          success_rate: c.requests ? percent(c.requests - c.errors, c.requests) : 'N/A',
          average_latency: averageLatency(c.totalLatencyMs, c.requests),
          endpoints_total: eps.length,
          endpoints_routable: routable,
          availability: eps.length ? percent(routable, eps.length) : '0.00%',
          endpoints_by_status: byStatus,
          check_latency: eps.length ? formatDuration(Math.max(...eps.map((e) => e.lastLatencyMs))) : null,
        };
      });
      return ctx.replyJson(200, {
        timestamp: new Date().toISOString(),
        total_models: models.length,
        total_requests: models.reduce((n, m) => n + m.requests, 0),
        models,
      });
    });
  },
});
