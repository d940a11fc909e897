// GET /internal/status/models: the model registry — each model with the ids of the endpoints
// serving it; ?detailed=true adds per-endpoint detail. Never URLs.
import { definePlugin } from '../engine/api.js';
import { capabilities } from './catalogue/model-formats.js';
import { queryOf } from './lib/query.js';
import { replyStatus } from './reports/status-json.js';

export default definePlugin<Record<string, never>>({
  name: 'models-report',
  terminal: true,
  schema: { type: 'object', additionalProperties: false },
  apply(hooks, _o, env) {
    const { catalogue, discovery } = env;
    hooks.dispatch.tap('models-report', (ctx) => {
      const detailed = queryOf(ctx).get('detailed') === 'true';
      const models = catalogue.all().map((m) => ({
        id: m.id,
        provider: m.family,
        capabilities: capabilities(m),
        context_window: m.contextWindow,
        available: m.endpoints.some((e) => e.routable),
        endpoint_ids: m.endpoints.map((e) => e.id),
        ...(detailed
          ? {
              digest: m.digest ?? null,
              names: m.names,
              endpoints: m.endpoints.map((e) => {
                const d = m.servedAs.get(e)!;
                return {
                  id: e.id,
                  name: e.name,
                  status: e.state,
                  served_as: d.name,
                  loaded: d.loaded ?? null,
                  size: d.size ?? null,
                  context: d.context ?? null,
                };
              }),
            }
          : {}),
      }));
      const byProvider: Record<string, number> = {};
      for (const m of models) byProvider[m.provider] = (byProvider[m.provider] ?? 0) + 1;
      return replyStatus(ctx, {
        timestamp: new Date().toISOString(),
        discovery: { enabled: discovery.enabled, interval_seconds: discovery.intervalMs / 1000 },
        total: models.length,
        by_provider: byProvider,
        models,
      });
    });
  },
});
