// The OpenTelemetry GenAI metrics in /internal/metrics, under the conventions' names and attributes
// (Prometheus spelling: dots to underscores, seconds suffixed), beside the gw_* series: request
// duration, time to first token and per output token, and token usage. metrics.gen_ai_conventions
// (or OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental) switches the token series to the
// announced rename: gen_ai.client.token.usage becomes the gen_ai.client.inference.* series.
// Tokens are those the relay counted (keys or tracing on) or a translating step read.
import type { Context, Endpoint, HistogramSeries, Metrics, PluginEnv } from '../../engine/api.js';
import { operationOf, providerOf, serverOf } from '../tracing/genai.js';
import { modelLabeler } from './metrics-instruments.js';

/** The conventions' advised bucket boundaries. */
const DURATION = [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92];
const TTFT = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10];
const TPOT = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5];
const TOKENS = [1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864];

const ATTRIBUTES = [
  'gen_ai_operation_name',
  'gen_ai_provider_name',
  'gen_ai_request_model',
  'gen_ai_response_model',
  'server_address',
  'server_port',
  'endpoint',
] as const;

type Conventions = 'default' | 'latest_experimental';

function series(m: Metrics, conventions: Conventions) {
  const with_ = (extra: string[]) => [...ATTRIBUTES, ...extra];
  return {
    duration: m.histogram(
      'gen_ai_server_request_duration_seconds',
      'GenAI requests (chat, text completion, embeddings) from arrival to the end of the reply; error_type names a failure (a status, a gateway error code).',
      with_(['error_type']),
      DURATION,
    ),
    ttft: m.histogram(
      'gen_ai_server_time_to_first_token_seconds',
      'Streamed replies: from arrival to the first reply chunk relayed to the client.',
      with_([]),
      TTFT,
    ),
    tpot: m.histogram(
      'gen_ai_server_time_per_output_token_seconds',
      'Streamed replies with counted output tokens: the time after the first chunk per further output token.',
      with_([]),
      TPOT,
    ),
    tokens:
      conventions === 'default'
        ? {
            input: m.histogram(
              'gen_ai_client_token_usage',
              'Tokens per GenAI request, by gen_ai_token_type (input, output).',
              with_(['gen_ai_token_type']),
              TOKENS,
            ),
            output: null,
          }
        : {
            input: m.histogram('gen_ai_client_inference_operation_input_tokens', 'Input tokens per GenAI request.', with_([]), TOKENS),
            output: m.histogram('gen_ai_client_inference_operation_output_tokens', 'Output tokens per GenAI request.', with_([]), TOKENS),
          },
  };
}

interface Cells {
  labels: string[];
  /** By error_type's index (0: none). */
  duration: (HistogramSeries | undefined)[];
  ttft: HistogramSeries | null;
  tpot: HistogramSeries | null;
  input: HistogramSeries | null;
  output: HistogramSeries | null;
}

/** The GenAI observations of a finished request (the metrics step calls it from its done tap). */
export function genaiRecorder(env: PluginEnv, m: Metrics): (ctx: Context) => void {
  const s = series(m, env.config.metrics.gen_ai_conventions);
  const labelOf = modelLabeler(env.catalogue);
  /** Per endpoint, operation and model: the series and their labels, looked up once. */
  const cells = new Map<Endpoint, Map<string, Map<string, Cells>>>();
  const errorIndex = new Map<string, number>([['', 0]]);
  const cellsOf = (ep: Endpoint, op: string, model: string): Cells => {
    let byOp = cells.get(ep);
    if (!byOp) cells.set(ep, (byOp = new Map()));
    let byModel = byOp.get(op);
    if (!byModel) byOp.set(op, (byModel = new Map()));
    let c = byModel.get(model);
    if (!c) {
      const { address, port } = serverOf(ep);
      const labels = [op, providerOf(ep.family), model, model, address, String(port), ep.name];
      byModel.set(model, (c = { labels, duration: [], ttft: null, tpot: null, input: null, output: null }));
    }
    return c;
  };
  return (ctx) => {
    const ep = ctx.endpoint;
    if (!ep) return;
    const op = operationOf(ctx.pathname);
    if (!op) return;
    const rec = ctx.attempt;
    const c = cellsOf(ep, op, labelOf(ctx.model));
    const { labels } = c;
    const error = errorOf(ctx);
    let i = errorIndex.get(error);
    if (i === undefined) errorIndex.set(error, (i = errorIndex.size));
    (c.duration[i] ??= s.duration.with(...labels, error)).observe(ctx.totalMs / 1000);
    const usage = rec.usage ?? ctx.usage;
    if (rec.streamed && rec.firstChunkMs > 0) {
      (c.ttft ??= s.ttft.with(...labels)).observe(rec.firstChunkMs / 1000);
      const output = usage?.output;
      if (output !== undefined && output > 1) (c.tpot ??= s.tpot.with(...labels)).observe((ctx.totalMs - rec.firstChunkMs) / 1000 / (output - 1));
    }
    if (!usage) return;
    const { tokens } = s;
    if (tokens.output === null) {
      if (usage.input !== undefined) (c.input ??= tokens.input.with(...labels, 'input')).observe(usage.input);
      if (usage.output !== undefined) (c.output ??= tokens.input.with(...labels, 'output')).observe(usage.output);
    } else {
      if (usage.input !== undefined) (c.input ??= tokens.input.with(...labels)).observe(usage.input);
      if (usage.output !== undefined) (c.output ??= tokens.output.with(...labels)).observe(usage.output);
    }
  };
}

/** error.type: empty for a success; the gateway's code, a broken stream, or the status. */
function errorOf(ctx: Context): string {
  const err = ctx.error as { key?: unknown } | null;
  if (err === null) return ctx.status >= 400 ? String(ctx.status) : '';
  if (typeof err.key === 'string') return err.key;
  if (ctx.brokeOff) return 'stream_broken';
  return ctx.status >= 400 ? String(ctx.status) : '';
}
