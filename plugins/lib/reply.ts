// Small helpers for steps that answer a request themselves (status routes, intercepts).
import type { Context } from '../../engine/context.js';
import { writeHead } from '../../engine/head.js';

export function replyJson(ctx: Context, status: number, value: unknown, extra: string[] = []): true {
  const body = JSON.stringify(value);
  ctx.status = status;
  ctx.hooks.respond.call(ctx, status);
  writeHead(ctx.res, status, [
    ...ctx.replyHeaders, ...extra,
    'content-type', 'application/json; charset=utf-8',
    'content-length', String(Buffer.byteLength(body)),
  ]);
  ctx.res.end(ctx.req.method === 'HEAD' ? undefined : body);
  return true;
}
