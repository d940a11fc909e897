// The last resort: when no routable endpoint serves a request — none of the family is routable, or
// the model's (or alias's) own endpoints are all out — one that failed (Unhealthy, Offline) and
// serves it gets the request, rather than the client a 503 until its next health check, however
// far the backoff has grown: a backend that is back answers at once, as it would to a direct
// client, and is Healthy from that answer (backends/health.ts, markAnswered). One such request
// per endpoint at a time — it is the endpoint's breaker test request — and the next not before
// an initial breaker period after one failed; the others get the 503 meanwhile, with Retry-After.
// A failure leaves the endpoint's health as it was (its checks keep their schedule).
import { GatewayError, type Endpoint } from '../../engine/api.js';

/** Which endpoint out of rotation takes the request, sent which name (undefined: the body's).
 *  `down`: the endpoints out of rotation that may take it now (their breakers ready for one);
 *  `names`: what the request stands for (an alias's real names and fallbacks), undefined when it
 *  is the body's `model`; `anyEndpoint`: nothing of the family is routable, so one serving none of
 *  the names will do too. */
export function lastResortOf(
  down: readonly Endpoint[],
  names: readonly string[] | undefined,
  model: string | undefined,
  anyEndpoint: boolean,
  serves: (ep: Endpoint, name: string) => boolean,
): { ep: Endpoint; model: string | undefined } | undefined {
  if (down.length === 0) return undefined;
  for (const name of names ?? (model === undefined ? [] : [model])) {
    const ep = down.find((e) => serves(e, name));
    if (ep) return { ep, model: names ? name : undefined };
  }
  return anyEndpoint ? { ep: down[0], model: names?.[0] } : undefined;
}

/** The 503 while the endpoints that could take the request wait for their next last-resort
 *  request (one is out, or the last failed moments ago): Retry-After says when it goes. */
export function meanwhile(err: GatewayError, down: readonly Endpoint[]): GatewayError {
  if (down.length === 0 || down.some((e) => e.breaker.lastResortReady)) return err;
  // Each breaker by its own clock: two readings a moment apart would make a second of a millisecond.
  const s = String(Math.max(1, Math.ceil(Math.min(...down.map((e) => e.breaker.lastResortInMs)) / 1000)));
  const what = down.some((e) => e.breaker.testing) ? `a request is testing ${down.length === 1 ? 'it' : 'them'} now` : 'the last try failed moments ago';
  return new GatewayError(err.key, err.status, err.type, err.code, `${err.message}; ${what}: retry in ${s}s`, err.detail, ['retry-after', s]);
}
