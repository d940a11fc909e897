// The terminal step of the proxy routes, as a policy for the kernel's upstream path: the request
// goes as it came (prefix stripped), the reply comes back as the backend sent it. Failover and
// what may be sent twice (the profile's api.replay_safe_paths) are the kernel's: engine/kernel/upstream.ts.
import { definePlugin } from '../engine/kernel/plugin.js';
import { sendUpstream, type SendPolicy } from '../engine/kernel/upstream.js';

interface Options { max_retries?: number }

export default definePlugin<Options>({
  name: 'forward',
  needs: ['path', 'body', 'candidates'],
  terminal: true,
  schema: {
    type: 'object', additionalProperties: false,
    properties: { max_retries: { type: 'integer', minimum: 0, description: 'Default: proxy.max_retries' } },
  },
  apply(hooks, o, env) {
    const policy: SendPolicy = {
      maxRetries: o.max_retries ?? env.config.proxy.max_retries,
      replaySafe: (ctx, ep) => ep.replaySafe(ctx.method, ctx.pathname),
      request: (ctx, ep) => ({ method: ctx.method, path: ep.upstreamPath(ctx.path), headers: [], body: ctx.body }),
    };
    hooks.dispatch.tapPromise('forward', (ctx) => sendUpstream(ctx, policy));
  },
});
