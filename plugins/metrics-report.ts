// GET /internal/metrics: the gateway's Prometheus registry in the text format (version 0.0.4).
import { definePlugin, gwError } from '../engine/api.js';
import { registerCollected } from './reports/metrics-collected.js';
import { instruments } from './reports/metrics-instruments.js';

export default definePlugin<Record<string, never>>({
  name: 'metrics-report',
  terminal: true,
  schema: { type: 'object', additionalProperties: false },
  apply(hooks, _o, env) {
    const enabled = env.config.metrics.enabled;
    if (enabled) {
      // Every series exists from the first scrape (at 0), not only after its first observation.
      instruments(env.metrics);
      registerCollected(env);
    }
    const metrics = env.metrics;
    hooks.dispatch.tapPromise('metrics-report', async (ctx) => {
      if (!enabled) throw gwError('METRICS_DISABLED');
      const text = await metrics.text();
      if (text === null) throw gwError('METRICS_INCOMPLETE');
      return ctx.reply(200, text, ['content-type', metrics.contentType, 'cache-control', 'no-cache']);
    });
  },
});
