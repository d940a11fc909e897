// The terminal step of the proxy routes: send the request to the candidate endpoints in order
// (see lib/attempts.ts for what is retried where; the profile's api.replay_safe_paths say which
// requests may be sent twice) and relay the reply as it streams.
import type { UpstreamRequest } from '../engine/context.js';
import { definePlugin } from '../engine/plugin.js';
import { runAttempts } from './lib/attempts.js';
import { relay } from './lib/relay.js';

interface Options { max_retries?: number }

export default definePlugin<Options>({
  name: 'forward',
  terminal: true,
  schema: {
    type: 'object', additionalProperties: false,
    properties: { max_retries: { type: 'integer', minimum: 0, description: 'Default: proxy.max_retries' } },
  },
  apply(hooks, o, env) {
    const maxRetries = o.max_retries ?? env.config.proxy.max_retries;
    hooks.dispatch.tapPromise('forward', (ctx) => {
      const method = ctx.req.method ?? 'GET';
      return runAttempts(ctx, env, maxRetries, (ep) => ep.replaySafe(method, ctx.pathname), (ep, dispatcher) => {
        const up: UpstreamRequest = { method, path: ep.upstreamPath(ctx.path), headers: [], body: ctx.body };
        hooks.upstream.call(ctx, up);
        return relay(ctx, dispatcher, up);
      });
    });
  },
});
