// Count the finished request against its endpoint and model for the status routes (and each failed
// attempt before it against its endpoint); and the 429s of the per-endpoint rate limits, which the
// attempt loop answers as it tries the candidates (the rate-limit step counts its own). Client
// errors (4xx) are counted apart from failures (reports/request-outcome.ts).
import { definePlugin, GatewayError } from '../engine/api.js';
import { outcomeOf } from './reports/request-outcome.js';

interface Options {
  per_model: boolean;
}

export default definePlugin<Options>({
  name: 'stats',
  schema: {
    type: 'object',
    additionalProperties: false,
    properties: { per_model: { type: 'boolean', default: true, description: "Count per model too (reads the body's model when no step set one)" } },
  },
  apply(hooks, o, env) {
    const stats = env.stats;
    hooks.done.tap('stats', (ctx) => {
      stats.record(ctx.endpoint, ctx.totalMs, outcomeOf(ctx), o.per_model ? ctx.model : undefined);
      // Attempts that failed before the answer count against their endpoints too (the one whose
      // failure is the answer is the request itself, counted above); a backend's 4xx as a client error.
      const tried = ctx.attempt.tried;
      if (tried) {
        for (const t of tried) {
          if (t.answered) continue;
          const c = stats.endpoint(t.endpoint);
          c.requests++;
          if (t.clientError) c.clientErrors++;
          else c.errors++;
        }
      }
      if (ctx.status === 429 && ctx.error instanceof GatewayError && ctx.error.key === 'ENDPOINT_RATE_LIMITED') stats.rateLimited.endpoint++;
    });
  },
});
