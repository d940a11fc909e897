// The attempt loop shared by the terminal steps that send to endpoints (forward, translate).
// Before any response byte reached the client:
// - an open circuit breaker skips the endpoint (its health is left alone);
// - a failure before the request went out (refused, connect timeout, unreachable, a TLS error):
//   no backend saw it; the endpoint is marked unhealthy (and probed again at once) and the
//   request goes to the next candidate;
// - reset, closed, no reply head in time, after it went out: the backend may have read it. A replay-safe
//   request (inference) goes to the next candidate like above — after one retry on a fresh
//   connection when a pooled socket reset or closed, since a socket the backend closed while
//   idle fails this way and says nothing about the backend. Any other request (model
//   management) is never sent twice: 502 or 504. It always rides a fresh connection, so a
//   stale pooled socket cannot be what failed it.
// Each endpoint is tried once, within max_retries; once a byte has been relayed nothing is retried.
import type { Dispatcher } from 'undici';
import { Client } from 'undici';
import type { Context } from '../../engine/context.js';
import { formatDuration } from '../../engine/duration.js';
import type { Endpoint } from '../../engine/endpoints.js';
import { gwError } from '../../engine/errors.js';
import type { PluginEnv } from '../../engine/plugin.js';
import { brokeAfterStart, ClientGone, connectionFailure, StepFailed, unsendable, type ConnectionFailure, type Outcome } from './relay.js';

/** One attempt at one endpoint through the given dispatcher (its pool, or a fresh connection). */
export type Perform = (ep: Endpoint, dispatcher: Dispatcher) => Promise<Outcome>;

async function tracked(ep: Endpoint, dispatcher: Dispatcher, perform: Perform): Promise<Outcome> {
  ep.active++;
  try {
    return await perform(ep, dispatcher);
  } finally {
    ep.active--;
  }
}

/** One attempt on a connection of its own, closed afterwards. */
async function fresh(ep: Endpoint, perform: Perform): Promise<Outcome> {
  const client = new Client(ep.origin, ep.dispatcherOptions());
  try {
    return await tracked(ep, client, perform);
  } finally {
    void client.close();
  }
}

const failureOf = (o: Outcome): ConnectionFailure | undefined => (o.relayed ? undefined : connectionFailure(o.error));

export async function runAttempts(ctx: Context, env: PluginEnv, maxRetries: number, replaySafe: (ep: Endpoint) => boolean, perform: Perform): Promise<true> {
  const { log, health } = env;
  let skipped = 0;
  let failed = 0;
  let last: string | undefined;
  for (const ep of ctx.candidates) {
    if (ctx.attempts > maxRetries) break;
    const ticket = ep.breaker.admit();
    if (!ticket) {
      skipped++;
      continue;
    }
    ctx.attempts++;
    ctx.endpoint = ep;
    let safe = false;
    let outcome: Outcome;
    try {
      safe = replaySafe(ep);
      outcome = safe ? await tracked(ep, ep.pool, perform) : await fresh(ep, perform);
      const first = failureOf(outcome);
      if (safe && !outcome.relayed && outcome.sent && (first === 'reset' || first === 'closed')) {
        log.debug({ req: ctx.id, endpoint: ep.name, failure: first }, 'pooled connection failed before a reply; retrying on a fresh one');
        outcome = await fresh(ep, perform);
      }
    } catch (err) {
      // A step threw while preparing the attempt: a gateway bug, not the endpoint's failure.
      ep.breaker.release(ticket);
      throw err;
    }
    if (outcome.relayed) {
      const transient = ep.profile.health.transient_statuses.includes(ctx.status);
      if (ctx.error instanceof ClientGone) ep.breaker.release(ticket);
      else if (ctx.error || (ctx.status >= 500 && !transient)) ep.breaker.failure(ticket);
      else ep.breaker.success(ticket);
      if (brokeAfterStart(ctx)) log.warn({ req: ctx.id, endpoint: ep.name, err: ctx.error }, 'the reply broke off after it had started');
      return true;
    }
    const { error, sent } = outcome;
    if (error instanceof StepFailed) {
      ep.breaker.release(ticket);
      throw error.failure;
    }
    if (unsendable(error)) {
      ep.breaker.release(ticket);
      throw gwError('BAD_REQUEST', { reason: `the request cannot be forwarded as it is: ${error.message}` });
    }
    ep.breaker.failure(ticket);
    const timeout = formatDuration(ep.timeouts.responseMs);
    const code = (error as { code?: string }).code ?? error.message;
    // Anything that failed before the request went out (a TLS handshake too) is a connection
    // failure, whatever its code; after, only what the code says is one.
    const failure = failureOf(outcome) ?? (sent ? undefined : `connect failed (${code})`);
    if (!failure) throw gwError('UPSTREAM_ERROR', { endpoint: ep.name, reason: code });
    health.markFailed(ep, failure === 'timeout' ? `no reply head within ${timeout}` : `connection ${failure}`);
    if (sent && !safe) {
      if (failure === 'timeout') throw gwError('UPSTREAM_TIMEOUT', { endpoint: ep.name, timeout, detail: 'not sent again: this route is not replay-safe (model management)' });
      throw gwError('UPSTREAM_ERROR', {
        endpoint: ep.name,
        reason: `connection ${failure} after the backend may have read the ${ctx.req.method} request; not sent again, so it never runs twice (model-management routes are not replay-safe)`,
      });
    }
    failed++;
    last = failure;
    log.warn({ req: ctx.id, endpoint: ep.name, failure }, 'attempt failed; trying the next endpoint');
  }
  const provider = ctx.route.profile?.name ?? ctx.route.pipeline;
  if (failed === 0 && skipped > 0) throw gwError('CIRCUIT_BREAKER', { provider, skipped });
  throw gwError('ENDPOINT_UNAVAILABLE', {
    provider,
    reason: `${failed} endpoint${failed === 1 ? '' : 's'} failed${last ? ` (last: ${last})` : ''}, ${skipped} skipped for an open circuit breaker`,
  });
}
