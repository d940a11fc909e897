// What each API key used. While keys are on, the relay counts the tokens of every reply that
// reached the client (engine/routing/usage.ts: as the engine reported them, else estimated); when
// the request is over this step files them under key × model × endpoint — the usage ledger (GET
// /internal/usage, kept across restarts and shared by workers) and /internal/metrics — which
// settles the request's token reservation (token-limit.ts) on them. While keys are off, nothing
// is tapped.
import { definePlugin, type CounterCell, type Spent } from '../engine/api.js';
import { KeyTable } from './access/key-table.js';
import { RESERVED } from './access/reservation.js';
import { instruments, modelLabeler } from './reports/metrics-instruments.js';

const NAME = 'usage';
const TYPES = ['input', 'cached_input', 'output', 'reasoning', 'estimated'] as const;
type Cells = Record<'requests' | (typeof TYPES)[number], CounterCell>;

export default definePlugin<Record<string, never>>({
  name: NAME,
  schema: { type: 'object', additionalProperties: false },
  apply(hooks, _o, env) {
    const table = KeyTable.of(env.config.auth);
    if (!table) return;
    const books = env.usage;
    const labelOf = modelLabeler(env.catalogue);
    const m = env.config.metrics.enabled ? instruments(env.metrics) : null;
    /** Per key, model and endpoint (bounded: configured names, catalogue models), its series:
     *  nested maps, so that a request looks them up without making a string. */
    const cells = new Map<string, Map<string, Map<string, Cells>>>();
    const cellsOf =
      m &&
      ((key: string, model: string, endpoint: string): Cells => {
        let byModel = cells.get(key);
        if (!byModel) cells.set(key, (byModel = new Map()));
        let byEndpoint = byModel.get(model);
        if (!byEndpoint) byModel.set(model, (byEndpoint = new Map()));
        let c = byEndpoint.get(endpoint);
        if (!c) {
          c = { requests: m.keyRequests.with(key, model, endpoint) } as Cells;
          for (const t of TYPES) c[t] = m.keyTokens.with(key, model, endpoint, t);
          byEndpoint.set(endpoint, c);
        }
        return c;
      });

    hooks.done.tap(NAME, (ctx) => {
      const caller = ctx.caller;
      if (caller === null) return;
      const id = (ctx.state[RESERVED] as number | undefined) ?? 0;
      const u = ctx.attempt.usage;
      // A request no engine answered on an inference route used nothing: its reservation (if
      // any) is released, and it is not counted.
      if (u === null) {
        if (id !== 0) books.settle(id, null);
        return;
      }
      const model = labelOf(ctx.model);
      const spent: Spent = {
        key: caller.name,
        model,
        input: u.input,
        cachedInput: u.cachedInput,
        output: u.output,
        reasoning: u.reasoning,
        estimated: u.estimated,
      };
      books.settle(id, spent);
      if (!cellsOf) return;
      const c = cellsOf(caller.name, model, ctx.endpoint?.name ?? 'none');
      c.requests.value++;
      c.input.value += u.input;
      c.output.value += u.output;
      if (u.cachedInput) c.cached_input.value += u.cachedInput;
      if (u.reasoning) c.reasoning.value += u.reasoning;
      if (u.estimated) c.estimated.value += u.estimated;
    });
  },
});
