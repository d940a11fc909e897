// The routes each fake family answers ("METHOD /path", or "METHOD /prefix/*" for every path
// under the prefix). Paths not listed here get an echo of what arrived.
import type { ServerResponse } from 'node:http';
import type { FakeBackend, Recorded } from './backend.js';
import {
  chatCompletion,
  completion,
  embeddings,
  llamaTimings,
  loadedModels,
  modelList,
  modelObject,
  nativeCountTokens,
  nativeMessages,
  pieces,
  sendJson,
  vector,
  type ListFormat,
} from './openai.js';
import { responses } from './responses.js';
import { engineLoad, llamaMetrics, llamaSlots, sendMetrics, sglangMetrics, vllmMetrics } from './load.js';

export interface Handler {
  /** health: exempt from failure behaviours; generate: counted as an execution and subject to
   *  `status`; load: the engine's load report, exempt from failure behaviours too. */
  kind: 'health' | 'list' | 'generate' | 'other' | 'load';
  /** Text generation from a prompt: simulated prefix cache and prefill (FakeBackend.prefill). */
  prompt?: boolean;
  fn: (fake: FakeBackend, rec: Recorded, res: ServerResponse) => void | Promise<void>;
}

type Table = Record<string, Handler>;
const CREATED_AT = '2026-11-01T10:00:00Z';

const health = (body: (f: FakeBackend) => unknown): Handler => ({
  kind: 'health',
  fn: (f, _r, res) => {
    const b = body(f);
    if (b === '') {
      res.writeHead(200, { 'content-length': 0 });
      res.end();
    } else if (typeof b === 'string') {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end(b);
    } else sendJson(res, 200, b, f);
  },
});
const list = (format: ListFormat): Handler => ({ kind: 'list', fn: (f, _r, res) => sendJson(res, 200, modelList(f, format), f) });
const gen = (fn: Handler['fn']): Handler => ({ kind: 'generate', fn });
const other = (fn: Handler['fn']): Handler => ({ kind: 'other', fn });
const text = (fn: Handler['fn']): Handler => ({ kind: 'generate', prompt: true, fn });
const load = (fn: Handler['fn']): Handler => ({ kind: 'load', fn });
const metrics = (render: (f: FakeBackend) => string, contentType?: string) => load((f, _r, res) => sendMetrics(res, render(f), contentType));

/** The messages API, on the families that declare native support. */
const messages: Table = { 'POST /v1/messages': text(nativeMessages) };

/** The chat-completions routes under a base ("" or "/api" or "/engines"). */
function common(base: string, listFormat: ListFormat = 'common'): Table {
  return {
    [`GET ${base}/v1/models`]: list(listFormat),
    [`GET ${base}/v1/models/*`]: { kind: 'list', fn: (f, r, res) => modelObject(f, r, res, `${base}/v1/models/`) },
    [`POST ${base}/v1/chat/completions`]: text(chatCompletion),
    [`POST ${base}/v1/completions`]: text(completion),
    [`POST ${base}/v1/embeddings`]: gen(embeddings),
    [`POST ${base}/v1/responses`]: gen(responses),
  };
}

const native = (f: FakeBackend, r: Recorded) => ({ model: r.json?.model ?? f.models[0]?.name, created_at: CREATED_AT });
const durations = {
  total_duration: 1_200_000,
  load_duration: 100_000,
  prompt_eval_count: 5,
  prompt_eval_duration: 200_000,
  eval_count: 7,
  eval_duration: 900_000,
};
/** Ollama counts the prompt tokens it evaluated, not those it found cached. */
const counts = (r: Recorded) => (r.prefill ? { ...durations, prompt_eval_count: r.prefill.evaluated } : durations);

/** Native runner routes: one JSON object per line when streaming (the default). */
function ndjson(field: 'message' | 'response'): Handler['fn'] {
  return async (f, r, res) => {
    const wrap = (text: string) => (field === 'message' ? { message: { role: 'assistant', content: text } } : { response: text });
    if (r.json?.stream === false) {
      sendJson(
        res,
        200,
        { ...native(f, r), ...wrap(f.replyFor(r)), done: true, done_reason: 'stop', ...(field === 'response' ? { context: [1, 2, 3] } : {}), ...counts(r) },
        f,
      );
      return;
    }
    const lines = pieces(f.replyFor(r)).map((p) => `${JSON.stringify({ ...native(f, r), ...wrap(p), done: false })}\n`);
    lines.push(`${JSON.stringify({ ...native(f, r), ...wrap(''), done: true, done_reason: 'stop', ...counts(r) })}\n`);
    await f.writeStream(res, lines, 'application/x-ndjson');
  };
}

/** The runner's version: one that serves /api/embed, /v1/responses and /v1/messages. */
export const OLLAMA_VERSION = '0.12.6';

/** POST /api/embed: `input` is a string or an array of strings; one vector each. */
const ollamaEmbed: Handler['fn'] = (f, r, res) => {
  const input: unknown[] = Array.isArray(r.json?.input) ? r.json.input : [r.json?.input ?? ''];
  sendJson(
    res,
    200,
    {
      model: r.json?.model ?? f.models[0]?.name,
      embeddings: input.map((s) => vector(String(s))),
      total_duration: 14_143_917,
      load_duration: 1_019_500,
      prompt_eval_count: input.length * 3,
    },
    f,
  );
};

/** GET /api/ps: the loaded models (those marked loaded, else the first), each held for five more minutes. */
const ollamaPs: Handler['fn'] = (f, _r, res) => {
  const details = { parent_model: '', format: 'gguf', family: 'llama', families: ['llama'], parameter_size: '8B', quantization_level: 'Q4_K_M' };
  const models = loadedModels(f).map((m) => ({
    name: m.name,
    model: m.name,
    size: m.size ?? 4_000_000_000,
    digest: (m.digest ?? `sha256:${m.name}`).replace(/^sha256:/, ''),
    details,
    expires_at: new Date(Date.now() + 300_000).toISOString(),
    size_vram: m.size ?? 4_000_000_000,
    context_length: m.context ?? 4096,
  }));
  sendJson(res, 200, { models }, f);
};

/** The native completion of the C++ engine: SSE {content, stop} objects when streaming. */
const cppCompletion: Handler['fn'] = async (f, r, res) => {
  const timings = llamaTimings(f, r, f.replyFor(r));
  const final = {
    content: '',
    stop: true,
    model: f.models[0]?.name,
    stopped_eos: true,
    stopped_word: false,
    stopped_limit: false,
    stopping_word: '',
    tokens_predicted: timings.predicted_n,
    tokens_evaluated: timings.cache_n + timings.prompt_n,
    truncated: false,
    timings,
  };
  if (!r.json?.stream) {
    sendJson(
      res,
      200,
      {
        ...final,
        content: f.replyFor(r),
        prompt: r.json?.prompt ?? r.json?.input_prefix ?? '',
        generation_settings: {
          n_ctx: 4096,
          n_predict: r.json?.n_predict ?? 512,
          model: f.models[0]?.name,
          seed: -1,
          temperature: 0.8,
          top_k: 40,
          top_p: 0.95,
          repeat_penalty: 1.1,
        },
      },
      f,
    );
    return;
  }
  const events = pieces(f.replyFor(r)).map((p) => `data: ${JSON.stringify({ content: p, stop: false })}\n\n`);
  events.push(`data: ${JSON.stringify(final)}\n\n`);
  await f.writeStream(res, events, 'text/event-stream');
};

/** The health fields of vLLM- and SGLang-like fakes that count requests (as their /metrics do). */
function requests(f: FakeBackend) {
  const { running, waiting } = engineLoad(f);
  return { num_requests_running: running, num_requests_waiting: waiting };
}

/** radixengine's prefix cache, simulated: a prompt seen lately is a hit. Returns whether this
 *  one hit, and remembers it. */
function radixCacheHit(f: FakeBackend, r: Recorded): boolean {
  return f.promptCache.seen(JSON.stringify(r.json?.messages ?? r.json?.prompt ?? r.json?.text ?? r.text));
}

/** The metrics radixengine adds to chat and completion replies. */
const radixMetrics = (f: FakeBackend, r: Recorded) => ({
  metrics: { time_to_first_token_ms: 12, generation_time_ms: 40, radix_cache_hit_rate: radixCacheHit(f, r) ? 0.93 : 0 },
});

/** Ollama's api/show: model_info names the architecture and its context length (for fake
 *  models given a context; a real runner always has one, tests also need the pattern fallback). */
const ollamaShow: Handler['fn'] = (f, r, res) => {
  const name = r.json?.model ?? r.json?.name;
  const model = f.models.find((m) => m.name === name);
  if (!model) {
    sendJson(res, 404, { error: `model '${name}' not found` }, f);
    return;
  }
  const modelInfo = {
    'general.architecture': 'llama',
    'general.parameter_count': 8_030_261_248,
    ...(model.context ? { 'llama.context_length': model.context } : {}),
    'llama.embedding_length': 4096,
  };
  sendJson(
    res,
    200,
    {
      modelfile: `FROM ${name}`,
      parameters: 'stop "<|eot_id|>"',
      template: '{{ .Prompt }}',
      details: { family: 'llama' },
      model_info: modelInfo,
      capabilities: ['completion'],
    },
    f,
  );
};

const FAMILIES: Record<string, () => Table> = {
  localrunner: () => ({
    ...messages,
    'GET /': health(() => 'Local runner is running'),
    'GET /api/tags': list('localrunner'),
    'POST /api/chat': text(ndjson('message')),
    'POST /api/generate': text(ndjson('response')),
    'POST /api/embeddings': gen((f, r, res) =>
      sendJson(
        res,
        200,
        { embedding: vector(String(r.json?.prompt ?? '')), model: r.json?.model, total_duration: 1000, load_duration: 10, prompt_eval_count: 3 },
        f,
      ),
    ),
    'POST /api/embed': gen(ollamaEmbed),
    'POST /api/show': other(ollamaShow),
    'GET /api/ps': other(ollamaPs),
    'GET /api/version': other((f, _r, res) => sendJson(res, 200, { version: OLLAMA_VERSION }, f)),
    ...common(''),
  }),
  deskrunner: () => ({
    ...messages,
    ...common('', 'deskrunner'),
    'GET /v1/models': { ...list('deskrunner'), kind: 'health' },
    'GET /api/v1/models': list('deskrunner'),
    'GET /api/v0/models': list('deskrunner-legacy'),
  }),
  cppengine: () => ({
    ...messages,
    // The one family that counts tokens for the messages API (api.msgapi_support.token_count).
    'POST /v1/messages/count_tokens': gen(nativeCountTokens),
    'GET /health': health(() => ({ status: 'ok' })),
    ...common('', 'cppengine'),
    'POST /completion': text(cppCompletion),
    'POST /infill': text(cppCompletion),
    'GET /slots': load((f, r, res) => llamaSlots(f, r.url, res)),
    'GET /metrics': metrics(llamaMetrics, 'text/plain; version=0.0.4'),
    'POST /embedding': gen((f, r, res) => sendJson(res, 200, { embedding: vector(String(r.json?.content ?? '')), model: f.models[0]?.name }, f)),
    'POST /tokenize': other((f, r, res) => sendJson(res, 200, { tokens: [...String(r.json?.content ?? '')].map((c) => c.charCodeAt(0)) }, f)),
    'POST /detokenize': other((f, r, res) => sendJson(res, 200, { content: String.fromCharCode(...(r.json?.tokens ?? [])) }, f)),
  }),
  'hosted-compatible': () => ({ ...common('', 'hosted'), 'GET /v1/models': { ...list('hosted'), kind: 'health' } }),
  pagedengine: () => ({
    ...messages,
    'GET /health': health((f) => ({ status: 'ok', model_loaded: true, gpu_memory_usage: 0.42, ...requests(f) })),
    ...common('', 'pagedengine'),
    'GET /metrics': metrics(vllmMetrics),
  }),
  radixengine: () => ({
    'GET /health': health((f) => ({
      status: 'ok',
      model_loaded: true,
      radix_cache_ready: true,
      radix_cache_usage_perc: 0.1,
      ...requests(f),
      speculative_decoding_enabled: f.speculativeDecoding,
    })),
    ...common('', 'radixengine'),
    'GET /metrics': metrics(sglangMetrics),
    // Replies report the prefix cache in their bodies (no header): metrics on the common routes.
    'POST /v1/chat/completions': text((f, r, res) => chatCompletion(f, r, res, radixMetrics(f, r))),
    'POST /v1/completions': text((f, r, res) => completion(f, r, res, radixMetrics(f, r))),
    'POST /generate': text((f, r, res) =>
      sendJson(
        res,
        200,
        {
          text: f.reply,
          meta: {
            id: 'gen-1',
            rid: r.json?.rid ?? 'rid-1',
            finish_reason: 'stop',
            input_tokens: 5,
            output_tokens: 7,
            completion_time_ms: 3,
            radix_cache_hit: radixCacheHit(f, r),
          },
        },
        f,
      ),
    ),
  }),
  npuengine: () => ({
    'GET /api/v1/health': health(() => ({ status: 'ok', checkpoint_loaded: true, model_loaded: true })),
    ...common('/api', 'npuengine'),
    'POST /api/v1/load': other((f, r, res) => sendJson(res, 200, { status: 'success', message: 'loaded', model: r.json?.model }, f)),
  }),
  mlxmulti: () => ({
    ...messages,
    'GET /health': health(() => ({ status: 'ok' })),
    ...common('', 'mlxmulti'),
    'GET /v1/models/status': list('mlxmulti-status'),
    'POST /v1/rerank': gen((f, r, res) =>
      sendJson(
        res,
        200,
        {
          results: (r.json?.documents ?? []).map((_: unknown, index: number) => ({ index, relevance_score: 1 / (index + 1) })),
          model: r.json?.model,
          usage: { total_tokens: 10 },
        },
        f,
      ),
    ),
  }),
  mlxsingle: () => ({ 'GET /health': health(() => ({ status: 'ok' })), ...common('') }),
  containerrunner: () => ({
    ...common('/engines'),
    'GET /engines/v1/models': { ...list('common'), kind: 'health' },
    ...common('/engines/cpp'),
    ...common('/engines/paged'),
  }),
  turboengine: () => ({
    'GET /health': health(() => ''),
    ...common(''),
    'POST /v1/embeddings': gen((f, _r, res) =>
      sendJson(res, 400, { error: { message: 'embeddings are not supported; use /pooling', type: 'invalid_request_error' } }, f),
    ),
    'POST /generate': text((f, _r, res) => sendJson(res, 200, { generated_text: f.reply, finish_reason: 'stop' }, f)),
    'POST /pooling': gen(embeddings),
    'GET /is_sleeping': other((f, _r, res) => sendJson(res, 200, { is_sleeping: false }, f)),
  }),
  // A generic chat-completions server (type auto, or a type no profile names).
  auto: () => ({ 'GET /': health(() => 'OK'), ...common('') }),
  multigateway: () => ({
    'GET /health': health((f) => ({ status: 'healthy', models: f.models.length, providers: ['fake'] })),
    'GET /health/readiness': other((f, _r, res) => sendJson(res, 200, { status: 'ready' }, f)),
    'GET /health/liveness': other((f, _r, res) => sendJson(res, 200, { status: 'alive' }, f)),
    ...common('', 'multigateway'),
  }),
};

export function routesFor(family: string): Map<string, Handler> {
  const table = FAMILIES[family === 'hosted' ? 'hosted-compatible' : family];
  if (!table) throw new Error(`no fake for family ${family}; known: ${Object.keys(FAMILIES).join(', ')}`);
  return new Map(Object.entries(table()));
}

export const FAKE_FAMILIES = Object.keys(FAMILIES);
