// GET /internal/usage: per API key (by name), the tokens it used per model — requests,
// input_tokens, cached_input_tokens, output_tokens, reasoning_tokens, estimated_tokens — today
// (UTC) and in total, its requests under way, and what is left of each of its token limits.
// ?key=NAME: that key only (404 when no key has that name). With workers, the host's ledger.
import { definePlugin, gwError, type Budget } from '../engine/api.js';
import { KeyTable } from './access/key-table.js';
import { queryOf } from './lib/query.js';
import { replyStatus } from './reports/status-json.js';

export default definePlugin<Record<string, never>>({
  name: 'usage-report',
  terminal: true,
  schema: { type: 'object', additionalProperties: false },
  apply(hooks, _o, env) {
    const table = KeyTable.of(env.config.auth);
    const budgets: Budget[] = [];
    for (const key of table?.keys ?? [])
      budgets.push(key.limits ?? { key: key.name, limits: { perMinute: 0, perDay: 0, perMonth: 0 }, maxConcurrent: 0, model: null });
    const names = new Set(budgets.map((b) => b.key));
    hooks.dispatch.tapPromise('usage-report', async (ctx) => {
      const only = queryOf(ctx).get('key') ?? undefined;
      if (only !== undefined && !names.has(only)) throw gwError('ROUTE_NOT_FOUND', { method: ctx.method, path: `${ctx.requestPath}?key=${only}` });
      const keys = await env.usage.report(budgets, only);
      return replyStatus(ctx, { timestamp: new Date().toISOString(), keys_on: table !== null, keys });
    });
  },
});
