// One log line per finished request: method, path as the client sent it (never the query, which may carry keys),
// status, the API key's name, endpoint, model, time. Status routes follow the polling rule (the spec's): successful
// GET/HEAD polls (2xx, 304) log at debug, everything else at info — under /internal/ by default
// (`polling: auto`), or wherever `polling: true` says.
import { clip, definePlugin, type Caller } from '../engine/api.js';
import { affinityOutcome } from './routing/affinity.js';

interface Options {
  level: 'debug' | 'info';
  polling: boolean | 'auto';
}

export default definePlugin<Options>({
  name: 'access-log',
  schema: {
    type: 'object',
    additionalProperties: false,
    properties: {
      level: { enum: ['debug', 'info'], default: 'info' },
      polling: {
        enum: [true, false, 'auto'],
        default: 'auto',
        description: 'Status-route rule: successful GET/HEAD at debug, the rest at info (auto: for paths under /internal/)',
      },
    },
  },
  apply(hooks, o, env) {
    const log = env.log;
    // Per API key, a logger with its name bound: written once, not with every line.
    const keyLogs = new WeakMap<Caller, typeof log>();
    const logOf = (caller: Caller): typeof log => {
      let l = keyLogs.get(caller);
      if (!l) keyLogs.set(caller, (l = log.child({ key: caller.name })));
      return l;
    };
    hooks.done.tap('access-log', (ctx) => {
      const method = ctx.method;
      const polling = o.polling === 'auto' ? ctx.requestPath.startsWith('/internal/') : o.polling;
      const quietPoll = polling && (method === 'GET' || method === 'HEAD') && ((ctx.status >= 200 && ctx.status < 300) || ctx.status === 304);
      const level = polling ? (quietPoll ? 'debug' : 'info') : o.level;
      if (!log.isLevelEnabled(level)) return;
      // The API key's name (never the key), while keys are on.
      const caller = ctx.caller;
      const out = caller === null ? log : logOf(caller);
      const aborted = !ctx.res.writableFinished;
      const model = ctx.model;
      const affinity = ctx.plan?.affinity;
      out[level](
        {
          // The path as the client sent it, whether or not a step stripped the prefix before a refusal.
          req: ctx.id,
          method,
          path: clip(ctx.requestPath),
          status: ctx.status,
          endpoint: ctx.endpoint?.name,
          model: model === undefined ? undefined : clip(model),
          ms: Math.round(ctx.totalMs * 1000) / 1000,
          attempts: ctx.attempt.count || undefined,
          aborted: aborted || undefined,
          // Each attempt that failed before the one that answered: which endpoint and model, and how.
          tried: ctx.attempt.tried ?? undefined,
          routing: ctx.routing?.decision === 'fallback' ? ctx.routing.reason : undefined,
          // A stream that broke after its content: continued elsewhere, or not (and why, in a warning before).
          continuation: ctx.attempt.continuation ?? undefined,
          // Conversation affinity: what it did, and where the conversation's key came from.
          affinity: affinity ? affinityOutcome(affinity, ctx.endpoint) : undefined,
          affinity_key: affinity?.source ?? undefined,
          // The request's trace, while tracing is on: the log line and the spans find each other.
          trace_id: ctx.traceId,
        },
        'request',
      );
    });
  },
});
