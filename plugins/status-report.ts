// GET /internal/status: version, configuration summary, traffic statistics, endpoints, models and
// the system's state, and hot reload's last outcome. The state is the verdict /internal/health gives
// (reports/endpoint-view.ts): endpoint health, then the success rate of the recent requests that were
// not client errors; before any such traffic, endpoint health alone.
import { definePlugin, formatDuration, HostStats } from '../engine/api.js';
import { averageLatency, isHealthy, percent, SYSTEM_WORDS, verdict } from './reports/endpoint-view.js';
import { replyStatus } from './reports/status-json.js';
import { buildInfo } from './version.js';
import { workersView } from './reports/workers-view.js';

export default definePlugin<Record<string, never>>({
  name: 'status-report',
  terminal: true,
  schema: { type: 'object', additionalProperties: false },
  apply(hooks, _o, env) {
    const { endpoints, config, catalogue } = env;
    const build = buildInfo(env.version);
    hooks.dispatch.tapPromise('status-report', async (ctx) => {
      // The host's counters: with workers, every worker's summed (and each one's share below).
      const stats = await env.hostStats();
      const all = endpoints.all;
      const models = catalogue.all();
      const byProvider: Record<string, string[]> = {};
      for (const m of models) (byProvider[m.family] ??= []).push(m.id);
      const hasTraffic = stats.requestsTotal > 0;
      const rate = stats.recentSuccessRate();
      return replyStatus(ctx, {
        version: env.version,
        build,
        config: {
          proxy_engine: 'undici',
          load_balancer: config.proxy.load_balancer,
          endpoints_configured: all.length,
          models_discovered: models.length,
          // OpenTelemetry tracing: where spans go and the share of traces kept; null while off.
          tracing: env.tracer ? { exports_to: env.tracer.exportsTo, sample_ratio: env.tracer.sampleRatio } : null,
        },
        statistics: {
          requests_total: stats.requestsTotal,
          requests_active: all.reduce((n, e) => n + stats.activeOn(e), 0),
          requests_failed: stats.requestsFailed,
          requests_client_errors: stats.requestsClientErrors,
          average_latency: averageLatency(stats.totalLatencyMs, stats.requestsTotal),
          p95_latency: formatDuration(stats.percentile(95)),
          p99_latency: formatDuration(stats.percentile(99)),
        },
        endpoints: Object.fromEntries(
          all.map((ep) => {
            const c = stats.endpoint(ep);
            const served = catalogue.listOf(ep)?.length ?? 0;
            return [
              ep.name,
              {
                id: ep.id,
                healthy: isHealthy(ep),
                status: ep.state,
                models: served,
                requests: c.requests,
                errors: c.errors,
                client_errors: c.clientErrors,
                average_latency: averageLatency(c.totalLatencyMs, c.requests),
              },
            ];
          }),
        ),
        models: { total: models.length, by_provider: byProvider },
        reload: { ...env.reload },
        system: {
          status: SYSTEM_WORDS[verdict(stats, all)],
          has_traffic: hasTraffic,
          // Of the last 2048 requests that were not client errors: N/A before any traffic, 100%
          // while all of it was client errors (none failed).
          success_rate: rate === null ? (hasTraffic ? percent(1, 1) : 'N/A') : percent(rate, 1),
          endpoints_routable: all.filter((e) => e.routable).length,
          endpoints_total: all.length,
          uptime: formatDuration(Date.now() - env.startedAt.getTime()),
        },
        ...(stats instanceof HostStats ? { workers: workersView(stats) } : {}),
      });
    });
  },
});
