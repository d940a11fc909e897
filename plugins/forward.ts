// The terminal step of the proxy routes: send the request to the candidate endpoints in order and
// relay the first reply. Before any response byte reached the client:
// - an open circuit breaker skips the endpoint (its health is left alone);
// - refused, reset, connect timeout, unreachable: the endpoint is marked unhealthy and the same
//   request (body replayed) goes to the next candidate, each at most once, within max_retries;
// - a clean close after the backend took the request: on a reused keep-alive socket (a stale
//   socket race) it is retried once on a fresh connection; otherwise idempotent methods fail
//   over and others are not retried, so a generation is never run twice.
// Once a byte has been relayed nothing is retried.
import type { Dispatcher } from 'undici';
import { Client } from 'undici';
import type { Context, UpstreamRequest } from '../engine/context.js';
import type { Endpoint } from '../engine/endpoints.js';
import { gwError } from '../engine/errors.js';
import type { Hooks } from '../engine/hooks.js';
import { definePlugin, type PluginEnv } from '../engine/plugin.js';
import { ClientGone, connectionFailure, relay, type ConnectionFailure, type Outcome } from './lib/relay.js';

interface Options { max_retries?: number }

const IDEMPOTENT = new Set(['GET', 'HEAD', 'OPTIONS', 'PUT', 'DELETE']);

async function attempt(ctx: Context, hooks: Hooks, ep: Endpoint, dispatcher: Dispatcher): Promise<{ outcome: Outcome; reused: boolean }> {
  const up: UpstreamRequest = { method: ctx.req.method ?? 'GET', path: ep.upstreamPath(ctx.path), headers: [], body: ctx.body };
  hooks.upstream.call(ctx, up);
  const opened = ep.socketsOpened;
  ep.active++;
  try {
    const outcome = await relay(ctx, dispatcher, up);
    return { outcome, reused: ep.socketsOpened === opened };
  } finally {
    ep.active--;
  }
}

/** Once more, on a connection of its own (the pooled socket turned out to be stale). */
async function attemptFresh(ctx: Context, hooks: Hooks, ep: Endpoint): Promise<Outcome> {
  const client = new Client(ep.origin, ep.dispatcherOptions());
  try {
    return (await attempt(ctx, hooks, ep, client)).outcome;
  } finally {
    void client.close();
  }
}

export default definePlugin<Options>({
  name: 'forward',
  terminal: true,
  schema: {
    type: 'object', additionalProperties: false,
    properties: { max_retries: { type: 'integer', minimum: 0, description: 'Default: proxy.max_retries' } },
  },
  apply(hooks, o, env: PluginEnv) {
    const maxRetries = o.max_retries ?? env.config.proxy.max_retries;
    const { log, health } = env;

    hooks.dispatch.tapPromise('forward', async (ctx) => {
      const idempotent = IDEMPOTENT.has(ctx.req.method ?? 'GET');
      let skipped = 0;
      let failed = 0;
      let last: ConnectionFailure | undefined;
      for (const ep of ctx.candidates) {
        if (ctx.attempts > maxRetries) break;
        const ticket = ep.breaker.admit();
        if (!ticket) {
          skipped++;
          continue;
        }
        ctx.attempts++;
        ctx.endpoint = ep;
        let { outcome, reused } = await attempt(ctx, hooks, ep, ep.pool);
        let failure = outcome.relayed ? undefined : connectionFailure(outcome.error);
        if (failure === 'closed' && reused) {
          log.debug({ req: ctx.id, endpoint: ep.name }, 'reused connection closed before a reply; retrying on a fresh one');
          outcome = await attemptFresh(ctx, hooks, ep);
          failure = outcome.relayed ? undefined : connectionFailure(outcome.error);
        }
        if (outcome.relayed) {
          const transient = ep.profile.health.transient_statuses.includes(ctx.status);
          if (ctx.error instanceof ClientGone) ep.breaker.release(ticket);
          else if (ctx.error || (ctx.status >= 500 && !transient)) ep.breaker.failure(ticket);
          else ep.breaker.success(ticket);
          return true;
        }
        ep.breaker.failure(ticket);
        if (!failure || (failure === 'closed' && !idempotent)) {
          const code = (outcome.error as { code?: string }).code;
          if (code === 'UND_ERR_HEADERS_TIMEOUT') throw gwError('UPSTREAM_TIMEOUT', { endpoint: ep.name, timeout: env.config.proxy.response_timeout });
          const reason = failure === 'closed'
            ? `closed the connection after receiving the ${ctx.req.method} request; not retried, so it never runs twice`
            : code ?? outcome.error.message;
          throw gwError('UPSTREAM_ERROR', { endpoint: ep.name, reason });
        }
        failed++;
        last = failure;
        health.markFailed(ep, `connection ${failure}`);
        log.warn({ req: ctx.id, endpoint: ep.name, failure }, 'connection failed; trying the next endpoint');
      }
      const provider = ctx.route.profile?.name ?? ctx.route.pipeline;
      if (failed === 0 && skipped > 0) throw gwError('CIRCUIT_BREAKER', { provider, skipped });
      throw gwError('ENDPOINT_UNAVAILABLE', {
        provider,
        reason: `${failed} endpoint${failed === 1 ? '' : 's'} failed to connect${last ? ` (last: ${last})` : ''}, ${skipped} skipped for an open circuit breaker`,
      });
    });
  },
});
