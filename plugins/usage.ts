// What each API key used. While keys are on, the relay counts the tokens of every reply that
// reached the client (engine/routing/usage.ts: as the engine reported them, else estimated); when
// the request is over this step files them under key × model × endpoint — the usage ledger (GET
// /internal/usage, kept across restarts and shared by workers) and /internal/metrics — which
// settles the request's token reservation (token-limit.ts) on them. While keys are off, nothing
// is tapped.
import { definePlugin, type Spent } from '../engine/api.js';
import { KeyTable } from './access/key-table.js';
import { RESERVED } from './access/reservation.js';
import { instruments, modelLabel } from './reports/metrics-instruments.js';

const NAME = 'usage';

export default definePlugin<Record<string, never>>({
  name: NAME,
  schema: { type: 'object', additionalProperties: false },
  apply(hooks, _o, env) {
    const table = KeyTable.of(env.config.auth);
    if (!table) return;
    const books = env.usage;
    const { catalogue } = env;
    const m = env.config.metrics.enabled ? instruments(env.metrics) : null;

    hooks.done.tap(NAME, (ctx) => {
      const caller = ctx.caller;
      if (caller === null) return;
      const id = (ctx.state[RESERVED] as number | undefined) ?? 0;
      const attempt = ctx.attempt;
      // A request no backend was asked for used nothing: its reservation (if any) is released.
      if (attempt.count === 0) {
        if (id !== 0) books.settle(id, null);
        return;
      }
      const u = attempt.usage;
      const model = modelLabel(catalogue, ctx.model);
      const spent: Spent = {
        key: caller.name,
        model,
        input: u?.input ?? 0,
        cachedInput: u?.cachedInput ?? 0,
        output: u?.output ?? 0,
        reasoning: u?.reasoning ?? 0,
        estimated: u?.estimated ?? 0,
      };
      books.settle(id, spent);
      if (!m) return;
      const endpoint = ctx.endpoint?.name ?? 'none';
      m.keyRequests.with(caller.name, model, endpoint).value++;
      if (!u) return;
      m.keyTokens.with(caller.name, model, endpoint, 'input').value += u.input;
      m.keyTokens.with(caller.name, model, endpoint, 'output').value += u.output;
      if (u.cachedInput) m.keyTokens.with(caller.name, model, endpoint, 'cached_input').value += u.cachedInput;
      if (u.reasoning) m.keyTokens.with(caller.name, model, endpoint, 'reasoning').value += u.reasoning;
      if (u.estimated) m.keyTokens.with(caller.name, model, endpoint, 'estimated').value += u.estimated;
    });
  },
});
