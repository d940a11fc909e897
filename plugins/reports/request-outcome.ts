// Whose fault a finished request was, for the status counters and the system's verdict. A client
// error (4xx) is the request's: an unknown model, a path outside the allowlist, bad JSON, a body
// too large, the client's own rate limit, a plugin's 401/403, or a backend's own 4xx (a bad
// parameter); it never makes an endpoint or the system look unhealthy. Failures are 5xx, timeouts,
// connection errors, replies that broke off after their head, and a 429 for want of capacity
// (a full queue, an endpoint's rate, a backend's own 429): a saturated gateway is not healthy.
import { ClientGone, GatewayError, type Context, type Outcome } from '../../engine/api.js';

export function outcomeOf(ctx: Context): Outcome {
  if (ctx.brokeOff) return 'failed';
  const err = ctx.error;
  // A client that went away ended the request itself.
  if (err instanceof ClientGone) return 'client_error';
  // The gateway's 501 refuses a path the client asked for; the backend was never contacted.
  if (err instanceof GatewayError && err.key === 'PATH_NOT_SUPPORTED') return 'client_error';
  const status = ctx.status;
  if (status >= 500) return 'failed';
  if (status === 429) return err instanceof GatewayError && err.key === 'RATE_LIMITED' ? 'client_error' : 'failed';
  return status >= 400 ? 'client_error' : 'ok';
}
