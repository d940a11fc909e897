// The terminal step of the proxy routes: send the request to the first candidate endpoint and
// relay the reply. A connection error before any response byte marks the endpoint unhealthy and
// replays the same request on the next candidate (each at most once, within max_retries).
import type { UpstreamRequest } from '../engine/context.js';
import { gwError } from '../engine/errors.js';
import { definePlugin } from '../engine/plugin.js';
import { connectionFailure, relay } from './lib/relay.js';

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
    const log = env.log;
    hooks.dispatch.tapPromise('forward', async (ctx) => {
      const method = ctx.req.method ?? 'GET';
      let failed = 0;
      let lastFailure = '';
      for (const ep of ctx.candidates) {
        if (ctx.attempts > maxRetries) break;
        ctx.attempts++;
        ctx.endpoint = ep;
        const up: UpstreamRequest = { method, path: ep.basePath + ctx.path, headers: [], body: ctx.body };
        hooks.upstream.call(ctx, up);
        ep.active++;
        const outcome = await relay(ctx, ep, up).finally(() => ep.active--);
        if (outcome.relayed) return true;
        const failure = connectionFailure(outcome.error);
        if (!failure) {
          if ((outcome.error as { code?: string }).code === 'UND_ERR_HEADERS_TIMEOUT') {
            throw gwError('UPSTREAM_TIMEOUT', { endpoint: ep.name, timeout: env.config.proxy.response_timeout });
          }
          throw gwError('UPSTREAM_ERROR', { endpoint: ep.name, reason: (outcome.error as { code?: string }).code ?? outcome.error.message });
        }
        failed++;
        lastFailure = failure;
        env.health.markFailed(ep, `connection ${failure}`);
        log.warn({ req: ctx.id, endpoint: ep.name, failure }, 'connection failed; trying the next endpoint');
      }
      throw gwError('ENDPOINT_UNAVAILABLE', {
        provider: ctx.route.profile?.name ?? ctx.route.pipeline,
        reason: `${failed} endpoint${failed === 1 ? '' : 's'} failed to connect (last: ${lastFailure || 'none tried'})`,
      });
    });
  },
});
