// Running one request through a compiled route: request hook, then the terminal dispatch; any
// thrown error becomes the spec's envelope. `done` runs once the response closed, however it ended.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { Context, type RouteInfo } from './context.js';
import { GatewayError, gwError, renderError } from './errors.js';
import type { RouteRunner } from './compile.js';
import type { Runtime } from './runtime.js';

export function createRunner(runtime: Pick<Runtime, 'stats' | 'log'>): RouteRunner {
  const { stats, log } = runtime;

  const fail = (ctx: Context, err: unknown) => {
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
    try {
      ctx.hooks.respond.call(ctx, gw.status);
    } catch (e) {
      log.error({ req: ctx.id, err: e }, 'respond step failed while rendering an error');
    }
    renderError(ctx.res, gw, ctx.replyHeaders, ctx.route.errorFormat);
  };

  /** The last guard: whatever went wrong while answering, this request ends and nothing else does. */
  const failSafely = (ctx: Context, err: unknown) => {
    try {
      fail(ctx, err);
    } catch (e) {
      log.error({ req: ctx.id, err: e }, 'could not render an error reply; closing the connection');
      ctx.res.destroy();
    }
  };

  return (route: RouteInfo, req: IncomingMessage, res: ServerResponse) => {
    const ctx = new Context(req, res, route);
    const hooks = route.hooks;
    stats.inFlight++;
    res.once('close', () => {
      stats.inFlight--;
      try {
        hooks.done.call(ctx);
      } catch (err) {
        log.error({ req: ctx.id, err }, 'done step failed');
      }
    });
    hooks.request
      .promise(ctx)
      .then((answered) => (answered === true ? undefined : hooks.dispatch.promise(ctx)))
      .catch((err) => failSafely(ctx, err));
  };
}
