// Running one request through a compiled route: the request hook, then the terminal dispatch;
// any thrown error becomes an error reply in the route's shape through the one head writer. `done`
// runs once the response closed, however it ended. Nothing a step throws gets further than this request.
import type { IncomingMessage } from 'node:http';
import { StepFailed } from '../backends/failures.js';
import type { Stats } from '../backends/telemetry.js';
import { RequestContext, type RouteInfo } from './context.js';
import { GatewayError, gwError, renderError } from '../core/errors.js';
import type { GatewayResponse } from './response.js';

export type RouteRunner = (route: RouteInfo, req: IncomingMessage, res: GatewayResponse) => void;

function fail(ctx: RequestContext, err: unknown): void {
  const log = ctx.route.log;
  let gw: GatewayError;
  if (err instanceof GatewayError) gw = err;
  else {
    log.error({ req: ctx.id, err }, 'unexpected error while handling a request');
    gw = gwError('INTERNAL_ERROR');
  }
  ctx.error = gw;
  if (ctx.res.headersSent) {
    ctx.res.destroy();
    return;
  }
  ctx.status = gw.status;
  ctx.errorAnswered = true;
  try {
    renderError(ctx.res, gw, ctx.errorFormat);
  } catch (e) {
    if (!(e instanceof StepFailed)) throw e;
    log.error({ req: ctx.id, err: e.failure }, 'respond step failed while rendering an error');
    renderError(ctx.res, gw, ctx.errorFormat, true);
  }
}

/** The last guard: whatever went wrong while answering, this request ends and nothing else does. */
function failSafely(ctx: RequestContext, err: unknown): void {
  try {
    fail(ctx, err);
  } catch (e) {
    ctx.route.log.error({ req: ctx.id, err: e }, 'could not render an error reply; closing the connection');
    ctx.res.destroy();
  }
}

/** `stats.inFlight` counts requests being handled (shutdown and reload drain on it). */
export function createRunner(stats: Stats): RouteRunner {
  return (route, req, res) => {
    const ctx = new RequestContext(req, res, route);
    res.ctx = ctx;
    const hooks = route.hooks;
    stats.inFlight++;
    res.once('close', () => {
      stats.inFlight--;
      // A request waiting for an endpoint's slot leaves the queue at once.
      const waiting = ctx.attempt.waiting;
      if (waiting) waiting.queue.leave(waiting.waiter);
      try {
        hooks.done.call(ctx);
      } catch (err) {
        route.log.error({ req: ctx.id, err }, 'done step failed');
      }
    });
    hooks.request
      .promise(ctx)
      // A request step that answered (even one that forgot to return true) ends it there.
      .then((answered) => (answered === true || res.headersSent ? undefined : hooks.dispatch.promise(ctx)))
      .then(() => {
        // Every request gets an answer: a terminal step that returned without one is a bug.
        if (!res.headersSent && !res.destroyed) throw new Error(`pipeline ${route.pipeline}: no step answered the request`);
      })
      .catch((err) => failSafely(ctx, err));
  };
}
