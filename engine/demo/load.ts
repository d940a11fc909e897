// What a fake engine says about its load on its own routes (llama.cpp's /slots and /metrics,
// vLLM's and SGLang's /metrics), from the generation requests it serves now (FakeBackend.inFlight)
// and what other clients are said to put on it (behaviour.otherLoad). Shapes, names and number
// formats follow the replies in test/fixtures/engine-load/ (see its README).
import type { ServerResponse } from 'node:http';
import type { FakeBackend } from './backend.js';

/** Requests running and waiting. llama.cpp runs one per slot; the rest are deferred. */
export function engineLoad(f: FakeBackend): { running: number; waiting: number } {
  const busy = f.inFlight + f.behaviour.otherLoad.running;
  const waiting = f.behaviour.otherLoad.waiting;
  if (f.family !== 'cppengine') return { running: busy, waiting };
  return { running: Math.min(busy, f.slots), waiting: waiting + Math.max(0, busy - f.slots) };
}

const nCtx = (f: FakeBackend) => f.models[0]?.servingContext ?? f.models[0]?.context ?? 4096;

// A busy slot's sampling settings, as the recorded server listed them.
const PARAMS = JSON.parse(
  '{"seed":4294967295,"temperature":0.0,"dynatemp_range":0.0,"dynatemp_exponent":1.0,"top_k":40,"top_p":0.949999988079071,"min_p":0.05000000074505806,"top_n_sigma":-1.0,"xtc_probability":0.0,"xtc_threshold":0.10000000149011612,"typical_p":1.0,"repeat_last_n":64,"repeat_penalty":1.0,"presence_penalty":0.0,"frequency_penalty":0.0,"dry_multiplier":0.0,"dry_base":1.75,"dry_allowed_length":2,"dry_penalty_last_n":64,"mirostat":0,"mirostat_tau":5.0,"mirostat_eta":0.10000000149011612,"adaptive_target":-1.0,"adaptive_decay":0.8999999761581421,"max_tokens":2040,"n_predict":2040,"n_keep":0,"n_discard":0,"ignore_eos":true,"stream":true,"n_probs":0,"min_keep":0,"chat_format":"Content-only","reasoning_format":"deepseek","reasoning_in_content":false,"generation_prompt":"","samplers":["penalties","dry","top_n_sigma","top_k","typ_p","top_p","min_p","xtc","temperature"],"speculative.types":"none","timings_per_token":false,"post_sampling_probs":false,"backend_sampling":false,"lora":[]}',
);

/** GET /slots: one entry per slot, the first `running` processing. `?fail_on_no_slot=1` answers
 *  503 while every slot is busy. */
export function llamaSlots(f: FakeBackend, url: string, res: ServerResponse): void {
  const { running } = engineLoad(f);
  const p = f.lastPrefill ?? { cached: 0, evaluated: 0 };
  const busy = (id: number) => ({
    id,
    n_ctx: nCtx(f),
    speculative: false,
    is_processing: true,
    id_task: f.executions + id,
    n_prompt_tokens: p.cached + p.evaluated,
    n_prompt_tokens_processed: p.evaluated,
    n_prompt_tokens_cache: p.cached,
    params: PARAMS,
    next_token: [{ has_next_token: true, has_new_line: false, n_remain: -1, n_decoded: 0 }],
  });
  if (/[?&]fail_on_no_slot=(1|true)\b/.test(url) && running >= f.slots) {
    return json(res, 503, { error: { code: 503, message: 'no slot available', type: 'unavailable_error' } });
  }
  json(
    res,
    200,
    Array.from({ length: f.slots }, (_, id) => (id < running ? busy(id) : { id, n_ctx: nCtx(f), speculative: false, is_processing: false })),
  );
}

/** A metric with one sample (`labels` of the exposition), or several: [labels, value] each. */
type Metric = [name: string, type: 'counter' | 'gauge', help: string, value: number | [labels: string, value: number][]];

/** Prometheus text: each metric with its HELP and TYPE lines, then its samples. */
function exposition(metrics: Metric[], labels: string, format: (n: number) => string): string {
  return metrics
    .map(([name, type, help, value]) => {
      const samples = typeof value === 'number' ? [[labels, value] as const] : value;
      return `# HELP ${name} ${help}\n# TYPE ${name} ${type}\n${samples.map(([l, v]) => `${name}${l} ${format(v)}\n`).join('')}`;
    })
    .join('');
}

/** llama.cpp writes numbers as C++ streams do (6 significant digits). */
const cppNumber = (n: number) => String(Number(n.toPrecision(6)));

/** prometheus_client's (floatToGoString): Python's repr, with an exponent past 6 integer digits. */
function pyFloat(n: number): string {
  if (n !== 0 && Math.abs(n) < 1e-4) return n.toExponential().replace(/e-(\d)$/, 'e-0$1');
  const s = Number.isInteger(n) ? `${n}.0` : String(n);
  const dot = s.indexOf('.');
  return n > 0 && dot > 6 ? `${`${s[0]}.${s.slice(1, dot)}${s.slice(dot + 1)}`.replace(/\.?0+$/, '')}e+0${dot - 1}` : s;
}
const CREATED = Math.floor(Date.now() / 1000);

export function llamaMetrics(f: FakeBackend): string {
  const { running, waiting } = engineLoad(f);
  const t = f.tokens;
  return exposition(
    [
      ['llamacpp:prompt_tokens_total', 'counter', 'Number of prompt tokens processed, excluding cached tokens', t.evaluated],
      ['llamacpp:prompt_tokens_cached_total', 'counter', 'Number of prompt tokens reused from the cache', t.cached],
      ['llamacpp:prompt_seconds_total', 'counter', 'Total time spent processing prompts', (t.evaluated * f.behaviour.prefillMsPerToken) / 1000],
      ['llamacpp:tokens_predicted_total', 'counter', 'Number of generation tokens processed', t.generated],
      ['llamacpp:tokens_predicted_seconds_total', 'counter', 'Total time spent generating tokens', 0],
      ['llamacpp:n_decode_total', 'counter', 'Total number of llama_decode() calls, excluding speculative decoding and multimodal decoding', t.generated],
      ['llamacpp:n_tokens_max', 'counter', 'Largest observed sequence length (prompt + generation)', 0],
      ['llamacpp:spec_decode_num_draft_tokens_total', 'counter', 'Speculative: Total draft tokens generated', 0],
      ['llamacpp:spec_decode_num_accepted_tokens_total', 'counter', 'Speculative: Total draft tokens accepted by the target model', 0],
      ['llamacpp:spec_decode_num_drafts_total', 'counter', 'Speculative: Total speculative decoding verification steps', 0],
      ['llamacpp:prompt_tokens_seconds', 'gauge', 'Average prompt throughput in tokens/s', 0],
      ['llamacpp:predicted_tokens_seconds', 'gauge', 'Average generation throughput in tokens/s', 0],
      ['llamacpp:requests_processing', 'gauge', 'Number of requests processing', running],
      ['llamacpp:requests_deferred', 'gauge', 'Number of requests deferred', waiting],
      ['llamacpp:n_busy_slots_per_decode', 'gauge', 'Average number of busy slots per llama_decode() call', running ? 1 : 0],
    ],
    '',
    cppNumber,
  );
}

export function vllmMetrics(f: FakeBackend): string {
  const { running, waiting } = engineLoad(f);
  const model = `engine="0",model_name="${f.models[0]?.name ?? 'fake'}"`;
  return exposition(
    [
      ['vllm:num_requests_running', 'gauge', 'Number of requests in model execution batches.', running],
      ['vllm:num_requests_waiting', 'gauge', 'Number of requests waiting to be processed.', waiting],
      [
        'vllm:num_requests_waiting_by_reason',
        'gauge',
        "Number of waiting requests by reason. Reason labels: 'capacity' = waiting for scheduling capacity; 'deferred' = deferred by transient constraints (LoRA budget, KV transfer, blocked status). Sum of all reasons equals vllm:num_requests_waiting.",
        [
          [`{${model},reason="capacity"}`, waiting],
          [`{${model},reason="deferred"}`, 0],
        ],
      ],
      ['vllm:kv_cache_usage_perc', 'gauge', 'KV-cache usage. 1 means 100 percent usage.', f.prefixCache.tokens / f.prefixCache.capacity],
      ['vllm:prompt_tokens_total', 'counter', 'Number of prefill tokens processed.', f.tokens.evaluated],
      ['vllm:prompt_tokens_created', 'gauge', 'Number of prefill tokens processed.', CREATED],
      ['vllm:generation_tokens_total', 'counter', 'Number of generation tokens processed.', f.tokens.generated],
      ['vllm:generation_tokens_created', 'gauge', 'Number of generation tokens processed.', CREATED],
    ],
    `{${model}}`,
    pyFloat,
  );
}

/** SGLang serves /metrics through prometheus_client's multiprocess collector: every HELP is the same. */
export function sglangMetrics(f: FakeBackend): string {
  const { running, waiting } = engineLoad(f);
  const model = f.models[0]?.name ?? 'fake';
  const help = 'Multiprocess metric';
  const c = f.prefixCache;
  return (
    exposition(
      [
        ['sglang:num_running_reqs', 'gauge', help, running],
        ['sglang:num_queue_reqs', 'gauge', help, waiting],
        ['sglang:num_used_tokens', 'gauge', help, c.tokens],
        ['sglang:token_usage', 'gauge', help, Math.round((c.tokens / c.capacity) * 100) / 100],
        ['sglang:max_total_num_tokens', 'gauge', help, c.capacity],
      ],
      `{engine_type="unified",model_name="${model}",pp_rank="0",tp_rank="0"}`,
      pyFloat,
    ) +
    exposition(
      [
        ['sglang:prompt_tokens_total', 'counter', help, f.tokens.evaluated],
        ['sglang:generation_tokens_total', 'counter', help, f.tokens.generated],
      ],
      `{model_name="${model}"}`,
      pyFloat,
    )
  );
}

export function sendMetrics(res: ServerResponse, text: string, contentType = 'text/plain; version=0.0.4; charset=utf-8'): void {
  res.writeHead(200, { 'content-type': contentType, 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

function json(res: ServerResponse, status: number, value: unknown): void {
  const body = JSON.stringify(value);
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}
