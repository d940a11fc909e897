// Who is calling (the config's auth:): while keys are on, every route but the open ones (the
// probes, /version, GET /) needs a key that is listed, enabled and not expired; the status routes,
// metrics and dashboard (`admin`) need an admin key. The key's name goes on the context
// (ctx.caller) for the steps after it: model scopes, model lists, logs. A refusal is 401 (403 for
// a key that is not an admin) in the route's error shape, never saying which keys exist; on the
// admin routes it also asks for HTTP Basic, so that a browser prompts for the key (its password).
// A key's own request limit (requests_per_minute) is taken where the rate limits are kept. While
// no key is listed, nothing is tapped: no cost.
import { definePlugin, gwError, nameMatches, rateLimitHeaders, type Context, type SharedTake } from '../engine/api.js';
import { KeyTable, type Key } from './access/key-table.js';
import { tapTokens } from './access/take-tokens.js';

interface Options {
  open: string[];
  admin: string[];
}

const CHALLENGE = ['www-authenticate', 'Basic realm="inference gateway", charset="UTF-8"'];
const BINDING = 'authenticate';

export default definePlugin<Options>({
  name: 'authenticate',
  schema: {
    type: 'object',
    additionalProperties: false,
    properties: {
      open: {
        type: 'array',
        items: { type: 'string' },
        default: ['internal-health', 'internal-ready', 'version', 'root'],
        description: 'Pipelines (globs) that need no key: the probes, /version and GET /',
      },
      admin: {
        type: 'array',
        items: { type: 'string' },
        default: ['internal-*'],
        description: 'Pipelines (globs) that need an admin key (auth.admin): the status routes, metrics and the dashboard',
      },
    },
  },
  apply(hooks, o, env) {
    const table = KeyTable.of(env.config.auth);
    const matches = (globs: string[]) => globs.some((g) => nameMatches(g, env.pipeline));
    if (!table || matches(o.open)) return;
    const admin = matches(o.admin);
    const challenge = admin ? CHALLENGE : [];
    const limits = env.config.server.rate_limits;
    /** The key, or the refusal (thrown). */
    const keyOf = (ctx: Context): Key => {
      const key = table.keyOf(ctx);
      if (key === undefined) throw gwError('API_KEY_REQUIRED', {}, challenge);
      if (key === null) throw gwError('API_KEY_INVALID', {}, challenge);
      if (!key.enabled) throw gwError('API_KEY_DISABLED', {}, challenge);
      if (key.expiresAt !== Infinity && key.expiresAt <= Date.now()) throw gwError('API_KEY_EXPIRED', { at: new Date(key.expiresAt).toISOString() }, challenge);
      if (admin && !key.admin) throw gwError('ADMIN_KEY_REQUIRED');
      ctx.caller = key;
      return key;
    };
    if (!table.anyRate) {
      hooks.request.tap(BINDING, (ctx) => void keyOf(ctx));
      return;
    }
    // Keys with a request limit of their own: a token from the key's bucket, kept where the other
    // limits are (this process, the host, Redis).
    const burst = limits.burst_size;
    const takesOf = (ctx: Context): SharedTake[] | null => {
      const key = keyOf(ctx);
      return key.requestsPerMinute > 0 ? [{ scope: 'key', key: key.name, rate: { perMinute: key.requestsPerMinute, burst } }] : null;
    };
    tapTokens(hooks, BINDING, env.buckets.takerFor('key', limits), takesOf, (_ctx, _takes, answer) => {
      if (answer.refused < 0) return;
      const t = answer.takes[0];
      const retryAfter = Math.max(1, t.retryAfterS);
      throw gwError('KEY_RATE_LIMITED', { limit: t.limit, burst, retryAfter }, ['retry-after', String(retryAfter), ...rateLimitHeaders(t)]);
    });
  },
});
