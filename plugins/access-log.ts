// One log line per finished request: method, path (never the query, which may carry keys),
// status, endpoint, model, time. With `polling: true` (status routes), successful GET/HEAD
// polls (2xx, 304) log at debug and everything else at info.
import { clip } from '../engine/head.js';
import { definePlugin } from '../engine/plugin.js';

interface Options { level: 'debug' | 'info'; polling: boolean }

export default definePlugin<Options>({
  name: 'access-log',
  schema: {
    type: 'object', additionalProperties: false,
    properties: {
      level: { enum: ['debug', 'info'], default: 'info' },
      polling: { type: 'boolean', default: false, description: 'Status-route rule: successful GET/HEAD at debug, the rest at info' },
    },
  },
  apply(hooks, o, env) {
    const log = env.log;
    hooks.done.tap('access-log', (ctx) => {
      const method = ctx.req.method;
      const quietPoll = o.polling && (method === 'GET' || method === 'HEAD') && ((ctx.status >= 200 && ctx.status < 300) || ctx.status === 304);
      const level = o.polling ? (quietPoll ? 'debug' : 'info') : o.level;
      if (!log.isLevelEnabled(level)) return;
      const aborted = !ctx.res.writableFinished;
      const model = ctx.model ?? ctx.bodyModel();
      log[level]({
        req: ctx.id, method, path: clip(ctx.route.prefix ? ctx.route.prefix + ctx.pathname : ctx.pathname),
        status: ctx.status, endpoint: ctx.endpoint?.name, model: model === undefined ? undefined : clip(model),
        ms: Math.round(ctx.elapsedMs() * 1000) / 1000, attempts: ctx.attempts || undefined, aborted: aborted || undefined,
      }, 'request');
    });
  },
});
