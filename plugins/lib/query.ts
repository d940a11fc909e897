// The query string of a request, parsed on demand.
import type { Context } from '../../engine/api.js';

export function queryOf(ctx: Context): URLSearchParams {
  const url = ctx.req.url ?? '';
  const q = url.indexOf('?');
  return new URLSearchParams(q < 0 ? '' : url.slice(q + 1));
}
