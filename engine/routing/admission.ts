// Admission to an endpoint with a concurrency limit (its queue: backends/queue.ts), for the
// attempt loop. The fast path — a free slot — is queue.tryEnter() in attempt-loop.ts; this is the
// rest: a full queue turns the request away (the loop tries the next candidate), otherwise it
// waits its turn, leaving the queue at once if its client goes away. The limits are the
// endpoint's; the loop only keeps the order. Likewise an endpoint's requests-per-minute limit
// (Endpoint.rateGate): a candidate without a token is skipped, and 429 when none had one.
import type { Endpoint } from '../backends/endpoints.js';
import type { EndpointQueue, Turn } from '../backends/queue.js';
import type { Take } from '../backends/rate-buckets.js';
import { setTimeout as sleep } from 'node:timers/promises';
import type { AttemptState } from './attempt-state.js';
import type { Exchange } from './exchange.js';
import { formatDuration } from '../core/duration.js';
import { gwError, type GatewayError } from '../core/errors.js';

/** How admission ended when no slot was free at once; a wait past queue_timeout throws QUEUE_TIMEOUT. */
export async function waitForSlot(
  rec: AttemptState,
  clientGone: boolean,
  ep: Endpoint,
  queue: EndpointQueue,
  model: string,
): Promise<'full' | Exclude<Turn, 'timeout'>> {
  const from = performance.now();
  let turn: 'full' | Turn | undefined;
  try {
    return (turn = await takeTurn(rec, clientGone, ep, queue, model));
  } finally {
    // Not admitted: the endpoint's requests-per-minute token is given back.
    if (turn !== 'admitted') ep.rateGate?.refund();
    rec.queueMs += performance.now() - from;
  }
}

async function takeTurn(rec: AttemptState, clientGone: boolean, ep: Endpoint, queue: EndpointQueue, model: string): Promise<'full' | Exclude<Turn, 'timeout'>> {
  if (queue.full) {
    queue.reject();
    return 'full';
  }
  if (clientGone) return 'gone';
  const turn = await new Promise<Turn>((resolve) => {
    // Nothing the waiter holds reaches the request (the kernel's close listener finds it through
    // its attempt record): a closure over it kept whole requests alive and cost GC time per wait.
    rec.waiting = { queue, waiter: queue.wait(resolve, model) };
  });
  rec.waiting = null;
  if (turn === 'full') queue.reject();
  if (turn !== 'timeout') return turn;
  const retryAfter = queue.retryAfterSeconds();
  throw busy('QUEUE_TIMEOUT', { endpoint: ep.name, limit: queue.maxConcurrent, timeout: formatDuration(queue.timeoutMs), retryAfter }, retryAfter);
}

/** Admitted by an endpoint found down while the request waited (a hung engine's slots come back
 *  as its attempts are given up): the slot and the token go back, the request to the next candidate. */
export function leaveDown(ex: Exchange, ep: Endpoint, queue: EndpointQueue, model: string): void {
  // Nothing reached the engine: no load of its model ended.
  queue.release(performance.now(), model, false);
  ep.rateGate?.refund();
  ex.log.warn({ req: ex.id, endpoint: ep.name }, 'the endpoint was found down while the request waited for a slot; trying the next candidate');
}

/** Whom a refusal names: the route's family, else (a route over every family) the model. */
export interface Whom {
  provider?: string;
  model?: string;
}

/** Every candidate's queue was full: 429, with the soonest any of them expects room. */
export function queueFull(who: Whom, full: readonly Endpoint[]): GatewayError {
  const retryAfter = Math.min(...full.map((e) => e.queue?.retryAfterSeconds() ?? 1));
  return busy('QUEUE_FULL', { ...who, endpoints: full.map((e) => e.name).join(', '), retryAfter }, retryAfter);
}

/** Every candidate left was at its requests-per-minute limit (Endpoint.rateGate): 429, with the
 *  soonest any of them has a token again, and that endpoint's bucket in the X-RateLimit-* headers. */
export function endpointsRateLimited(who: Whom, limited: readonly Endpoint[]): GatewayError {
  let soonest: Take | null = null;
  for (const ep of limited) {
    const t = ep.rateGate?.peek();
    if (t && (!soonest || t.retryAfterS < soonest.retryAfterS)) soonest = t;
  }
  const retryAfter = Math.max(1, soonest?.retryAfterS ?? 1);
  return gwError('ENDPOINT_RATE_LIMITED', { ...who, endpoints: limited.map((e) => e.name).join(', '), retryAfter }, [
    'retry-after',
    String(retryAfter),
    ...(soonest ? rateLimitHeaders(soonest) : []),
  ]);
}

/** The X-RateLimit-* headers of a bucket: its rate, whole tokens left, seconds until it is full. */
export function rateLimitHeaders(t: Take): string[] {
  return ['x-ratelimit-limit', String(t.limit), 'x-ratelimit-remaining', String(t.remaining), 'x-ratelimit-reset', String(t.resetS)];
}

const busy = (key: 'QUEUE_FULL' | 'QUEUE_TIMEOUT', detail: Record<string, unknown>, retryAfter: number) =>
  gwError(key, detail, ['retry-after', String(retryAfter)]);

/** Wait `ms`; false when the client went away meanwhile (the wait ends at once). */
export async function pause(ex: Exchange, ms: number): Promise<boolean> {
  if (ex.res.destroyed) return false;
  const gone = new AbortController();
  const onClose = () => gone.abort();
  ex.res.once('close', onClose);
  try {
    await sleep(ms, undefined, { signal: gone.signal });
  } catch {
    // aborted: the client left
  } finally {
    ex.res.off('close', onClose);
  }
  return !ex.res.destroyed;
}
