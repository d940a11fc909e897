// A merged model-list route (an intercept with `merge`, localrunner's api/ps: what is loaded now,
// which the catalogue does not know): every routable endpoint of the family is asked at once
// (the kernel's askEach: each through its send path — breaker, in-flight counts, health — and
// all cancelled when the client leaves), within its check_timeout and a size limit, and their
// lists are concatenated, each entry once. A HEAD is answered from what is known without asking
// anyone: the head of a JSON reply, no body, no length.
import { askEach, askEndpoint, ClientGone, gwError, isObject, type Context, type Endpoint, type PluginEnv } from '../../engine/api.js';
import { sees } from '../access/visible.js';

/** A list of loaded models is a few KiB; this bounds what one endpoint can make the gateway hold. */
export const MERGE_REPLY_LIMIT = 1024 * 1024;

const JSON_TYPE = ['content-type', 'application/json; charset=utf-8'];

const keyOf = (item: unknown): unknown => (isObject(item) ? (item.name ?? item.model ?? item.id ?? JSON.stringify(item)) : item);

/** One endpoint's reply as an object, or undefined (logged at debug) when it failed. */
async function askOne(env: PluginEnv, ctx: Context, ep: Endpoint, signal: AbortSignal): Promise<Record<string, unknown> | undefined> {
  const headers = [...ep.headers, 'x-gw-request-id', ctx.id];
  // The client's credential goes on, as on any proxied request, unless it is the gateway's own key.
  const auth = ctx.caller === null ? ctx.header('authorization') : undefined;
  if (auth && !ep.headerNames.has('authorization')) headers.push('authorization', auth);
  try {
    const body = await askEndpoint(ep, ctx.path, {
      headers,
      signal,
      timeoutMs: ep.checkTimeoutMs,
      limit: MERGE_REPLY_LIMIT,
      what: `the ${ctx.pathname} reply`,
    });
    if (isObject(body)) return body;
    throw new Error('the reply is not a JSON object');
  } catch (err) {
    if (!(err instanceof ClientGone))
      env.log.debug({ req: ctx.id, endpoint: ep.name, path: ctx.pathname, err: (err as Error).message }, 'merged list: an endpoint did not answer; left out');
    return undefined;
  }
}

/** Answer the merged route: the first reply with `key` holding every reply's entries. */
export async function answerMerged(env: PluginEnv, ctx: Context, family: string, key: string): Promise<true> {
  if (ctx.method === 'HEAD') return ctx.replyHead(200, JSON_TYPE);
  const eps = env.endpoints.routable(family);
  const replies = await askEach(ctx, eps, (ep, signal) => askOne(env, ctx, ep, signal));
  // Nobody to answer: the requests still out were cancelled.
  if (replies === null) return true;
  const answered = replies.filter((r) => r !== undefined);
  if (answered.length === 0) throw gwError('UPSTREAM_ERROR', { endpoint: eps.map((e) => e.name).join(', '), reason: `none answered ${ctx.pathname}` });
  const seen = new Set<unknown>();
  const items: unknown[] = [];
  for (const r of answered) {
    for (const item of Array.isArray(r[key]) ? (r[key] as unknown[]) : []) {
      const k = keyOf(item);
      if (!seen.has(k) && sees(ctx, String(k))) {
        seen.add(k);
        items.push(item);
      }
    }
  }
  return ctx.replyJson(200, { ...answered[0], [key]: items });
}
