// Observe each finished request for /internal/metrics: its duration, the gateway's own share of
// it, stream timings and tokens, failovers, gateway errors and routing decisions. The timings are
// the kernel's (ctx.totalMs from the done hook's interceptor) and the attempt loop's (ctx.attempt:
// the upstream and queue spans, the first chunk); this step only files them. Series are looked up
// once per endpoint and status class, then observed by index.
import { definePlugin, ERROR_CODES, GatewayError, type CounterCell, type Endpoint, type HistogramSeries, type RoutingInfo } from '../engine/api.js';
import { affinityOutcome } from './routing/affinity.js';
import { outcomeKind } from './reports/outcome-kind.js';
import { genaiRecorder } from './reports/genai-series.js';
import { instruments, modelLabel, modelLabeler } from './reports/metrics-instruments.js';

const CLASSES = ['none', '1xx', '2xx', '3xx', '4xx', '5xx'] as const;
const classIndex = (status: number) => (status >= 100 && status < 600 ? Math.floor(status / 100) : 0);

export default definePlugin<Record<string, never>>({
  name: 'metrics',
  schema: { type: 'object', additionalProperties: false },
  apply(hooks, _o, env) {
    if (!env.config.metrics.enabled) return;
    const { catalogue } = env;
    const labelOf = modelLabeler(catalogue);
    const m = instruments(env.metrics);
    const family = env.profile?.name ?? 'none';
    const route = env.pipeline;
    // A failover count shows at 0 from the start; histogram series appear with their first
    // observation (an empty histogram is 18 lines of zeros per route).
    const failovers = m.failovers.with(family, route);
    let overhead: HistogramSeries | null = null;
    let fallbacks: CounterCell | null = null;
    let queueWait: HistogramSeries | null = null;
    /** Per X-Gw-Affinity value, its counter. */
    const affinityCells = new Map<string, CounterCell>();
    /** Per family and model, the input and output token counters. */
    const tokenCells = new Map<string, Map<string, [CounterCell, CounterCell]>>();
    // The OpenTelemetry GenAI series: durations, first and per-output-token times, tokens.
    const genai = genaiRecorder(env, env.metrics);
    const routingCells = new Map<string, Partial<Record<RoutingInfo['decision'], CounterCell>>>();
    // Per endpoint (null: none tried), the duration series of each status class met so far.
    const durations = new Map<Endpoint | null, (HistogramSeries | undefined)[]>();
    const durationOf = (ep: Endpoint | null, status: number): HistogramSeries => {
      let row = durations.get(ep);
      if (!row) durations.set(ep, (row = []));
      const c = classIndex(status);
      return (row[c] ??= m.duration.with(ep?.family ?? family, route, ep?.name ?? 'none', CLASSES[c]));
    };

    hooks.done.tap('metrics', (ctx) => {
      const total = ctx.totalMs;
      const attempt = ctx.attempt;
      const ep = ctx.endpoint;
      durationOf(ep, ctx.status).observe(total / 1000);
      (overhead ??= m.overhead.with(family, route)).observe(Math.max(0, total - attempt.upstreamMs - attempt.queueMs) / 1000);
      if (attempt.queueMs > 0) (queueWait ??= m.queueWait.with(family, route)).observe(attempt.queueMs / 1000);
      if (attempt.count > 1) failovers.value += attempt.count - 1;
      const tried = attempt.tried;
      if (tried) {
        for (const t of tried) m.failedAttempts.with(t.family, t.endpoint, modelLabel(catalogue, t.model), outcomeKind(t.outcome)).value++;
      }
      if (attempt.continuation) m.continuations.with(family, route, attempt.continuation).value++;
      const note = ctx.plan?.affinity;
      if (note) {
        const outcome = affinityOutcome(note, ep);
        let cell = affinityCells.get(outcome);
        if (!cell) {
          const cut = outcome.indexOf(' (');
          affinityCells.set(
            outcome,
            (cell = m.affinity.with(family, route, cut < 0 ? outcome : outcome.slice(0, cut), cut < 0 ? '-' : outcome.slice(cut + 2, -1))),
          );
        }
        cell.value++;
      }
      if (ctx.routing?.decision === 'fallback' && ctx.status > 0 && ctx.status < 400) (fallbacks ??= m.fallbacks.with(family, route)).value++;
      const err = ctx.error;
      if (err instanceof GatewayError) m.errors.with(route, err.key in ERROR_CODES ? err.key : 'other').value++;
      const routing = ctx.routing;
      if (routing) {
        let cells = routingCells.get(routing.strategy);
        if (!cells) routingCells.set(routing.strategy, (cells = {}));
        (cells[routing.decision] ??= m.routing.with(family, routing.strategy, routing.decision)).value++;
      }
      genai(ctx);
      // Counted by the relay while keys or tracing are on; else what a translating step read.
      const usage = attempt.usage ?? ctx.usage;
      if (!usage) return;
      const model = labelOf(ctx.model);
      const epFamily = ep?.family ?? family;
      let byModel = tokenCells.get(epFamily);
      if (!byModel) tokenCells.set(epFamily, (byModel = new Map()));
      let cells = byModel.get(model);
      if (!cells) byModel.set(model, (cells = [m.tokens.with(epFamily, model, 'input'), m.tokens.with(epFamily, model, 'output')]));
      if (usage.input !== undefined) cells[0].value += usage.input;
      if (usage.output !== undefined) cells[1].value += usage.output;
    });
  },
});
