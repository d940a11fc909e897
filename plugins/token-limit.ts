// A key's token limits (auth.keys[]: tokens_per_minute, _day, _month, model_limits,
// max_concurrent): before the terminal step sends, the request reserves its prompt's estimate
// plus its output cap (max_tokens…, at most auth.reserve_output_tokens) against every limit that
// applies, all or none, and is refused with 429 KEY_TOKEN_LIMITED (Retry-After, X-RateLimit-*-Tokens)
// when one cannot hold it. The `usage` step settles the reservation on what the request used. A
// shared step after model-scope; while no key has such a limit, nothing is tapped.
import { definePlugin, gwError, tokensIn, type Admission, type Budget, type Context } from '../engine/api.js';
import { Key, KeyTable } from './access/key-table.js';
import { RESERVED, outputCap } from './access/reservation.js';

const NAME = 'token-limit';

export default definePlugin<Record<string, never>>({
  name: NAME,
  uses: ['body', 'aliases'],
  schema: { type: 'object', additionalProperties: false },
  apply(hooks, _o, env) {
    const table = KeyTable.of(env.config.auth);
    if (!table?.anyBudget) return;
    const books = env.usage;
    const reserveOutput = env.config.auth.reserve_output_tokens;
    /** The request's limits, if its key has any. */
    const budgetOf = (ctx: Context): Budget | null => (ctx.caller instanceof Key ? ctx.caller.budgetFor(ctx.requested?.requested ?? ctx.model) : null);
    /** Its prompt's estimate and its output cap (within auth.reserve_output_tokens). */
    const reservation = (ctx: Context): number => tokensIn(ctx.body?.length ?? 0) + Math.min(outputCap(ctx.body) ?? reserveOutput, reserveOutput);
    const admitted = (ctx: Context, a: Admission): void => {
      if (a.ok) {
        ctx.state[RESERVED] = a.id;
        return;
      }
      const r = a.refusal;
      const headers = ['retry-after', String(r.retryAfterS)];
      if (r.limit !== 'max_concurrent') {
        headers.push(
          'x-ratelimit-limit-tokens',
          String(r.value),
          'x-ratelimit-remaining-tokens',
          String(r.remaining),
          'x-ratelimit-reset-tokens',
          String(r.resetS),
        );
      }
      throw gwError('KEY_TOKEN_LIMITED', { limit: r.limit, of: r.of, value: r.value, remaining: r.remaining, retryAfter: r.retryAfterS }, headers);
    };
    if (books.local) {
      hooks.request.tap(NAME, (ctx) => {
        const budget = budgetOf(ctx);
        if (budget) admitted(ctx, books.admit(budget, reservation(ctx)) as Admission);
      });
    } else {
      hooks.request.tapPromise(NAME, async (ctx) => {
        const budget = budgetOf(ctx);
        if (budget) admitted(ctx, await books.admit(budget, reservation(ctx)));
      });
    }
  },
});
