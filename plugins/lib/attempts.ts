// The attempt loop shared by the terminal steps that send to endpoints (forward, translate).
// Before any response byte reached the client:
// - an open circuit breaker skips the endpoint (its health is left alone);
// - refused, reset, connect timeout, unreachable: the endpoint is marked unhealthy and the same
//   request (body replayed) goes to the next candidate, each at most once, within max_retries;
// - a clean close after the backend took the request: on a reused keep-alive socket (a stale
//   socket race) it is retried once on a fresh connection; otherwise idempotent methods fail
//   over and others are not retried, so a generation is never run twice.
// Once a byte has been relayed nothing is retried.
import type { Dispatcher } from 'undici';
import { Client } from 'undici';
import type { Context } from '../../engine/context.js';
import type { Endpoint } from '../../engine/endpoints.js';
import { gwError } from '../../engine/errors.js';
import type { PluginEnv } from '../../engine/plugin.js';
import { ClientGone, connectionFailure, type ConnectionFailure, type Outcome } from './relay.js';

/** One attempt at one endpoint through the given dispatcher (its pool, or a fresh connection). */
export type Perform = (ep: Endpoint, dispatcher: Dispatcher) => Promise<Outcome>;

const IDEMPOTENT = new Set(['GET', 'HEAD', 'OPTIONS', 'PUT', 'DELETE']);

async function tracked(ep: Endpoint, dispatcher: Dispatcher, perform: Perform): Promise<{ outcome: Outcome; reused: boolean }> {
  const opened = ep.socketsOpened;
  ep.active++;
  try {
    const outcome = await perform(ep, dispatcher);
    return { outcome, reused: ep.socketsOpened === opened };
  } finally {
    ep.active--;
  }
}

async function fresh(ep: Endpoint, perform: Perform): Promise<Outcome> {
  const client = new Client(ep.origin, ep.dispatcherOptions());
  try {
    return (await tracked(ep, client, perform)).outcome;
  } finally {
    void client.close();
  }
}

export async function runAttempts(ctx: Context, env: PluginEnv, maxRetries: number, perform: Perform): Promise<true> {
  const { log, health } = env;
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
    let { outcome, reused } = await tracked(ep, ep.pool, perform);
    let failure = outcome.relayed ? undefined : connectionFailure(outcome.error);
    if (failure === 'closed' && reused) {
      log.debug({ req: ctx.id, endpoint: ep.name }, 'reused connection closed before a reply; retrying on a fresh one');
      outcome = await fresh(ep, perform);
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
}
