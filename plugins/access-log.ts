// One log line per finished request: method, path (never the query, which may carry keys),
// status, endpoint, model, time. Proxied requests log at info.
import { definePlugin } from '../engine/plugin.js';

interface Options { level: 'debug' | 'info' }

export default definePlugin<Options>({
  name: 'access-log',
  schema: {
    type: 'object', additionalProperties: false,
    properties: { level: { enum: ['debug', 'info'], default: 'info' } },
  },
  apply(hooks, o, env) {
    const log = env.log;
    hooks.done.tap('access-log', (ctx) => {
      if (!log.isLevelEnabled(o.level)) return;
      const aborted = !ctx.res.writableFinished;
      log[o.level]({
        req: ctx.id, method: ctx.req.method, path: ctx.route.prefix ? ctx.route.prefix + ctx.pathname : ctx.pathname,
        status: ctx.status, endpoint: ctx.endpoint?.name, model: ctx.model ?? ctx.bodyModel(),
        ms: Math.round(ctx.elapsedMs() * 1000) / 1000, attempts: ctx.attempts || undefined, aborted: aborted || undefined,
      }, 'request');
    });
  },
});
