// Chat-completions style replies (the "common formats" of the spec) and the model-list shapes
// of each family, produced from a fake's models and reply text.
import type { ServerResponse } from 'node:http';
import type { FakeBackend, FakeModel, Recorded } from './backend.js';
import { tokensOf } from './prefix-cache.js';

const CREATED = 1_732_000_000;

export function sendJson(res: ServerResponse, status: number, value: unknown, fake?: FakeBackend): void {
  const body = JSON.stringify(value);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), ...(fake ? { 'x-fake-backend': fake.name } : {}) });
  res.end(body);
}

/** The reply split into stream pieces: words with their leading space. */
export function pieces(text: string): string[] {
  return text.split(/(?= )/);
}

const modelOf = (fake: FakeBackend, rec: Recorded) => (typeof rec.json?.model === 'string' ? rec.json.model : (fake.models[0]?.name ?? 'fake'));

/** With a prefill, the prompt's tokens and those found cached, as vLLM, SGLang and llama.cpp report them. */
function usage(rec: Recorded, text: string) {
  const p = rec.prefill;
  const prompt = p ? p.cached + p.evaluated : Math.max(1, tokensOf(rec.text));
  const completion = Math.max(1, tokensOf(text));
  return {
    prompt_tokens: prompt,
    completion_tokens: completion,
    total_tokens: prompt + completion,
    ...(p ? { prompt_tokens_details: { cached_tokens: p.cached } } : {}),
  };
}

/** llama.cpp's `timings`: the prompt tokens found cached (cache_n) and evaluated (prompt_n). */
export function llamaTimings(fake: FakeBackend, rec: Recorded, text: string) {
  const p = rec.prefill ?? { cached: 0, evaluated: tokensOf(rec.text) };
  const predicted = tokensOf(text);
  const promptMs = p.evaluated * fake.behaviour.prefillMsPerToken || 1;
  const predictedMs = pieces(text).length * fake.behaviour.chunkDelayMs || 3;
  return {
    cache_n: p.cached,
    prompt_n: p.evaluated,
    prompt_ms: promptMs,
    prompt_per_token_ms: promptMs / Math.max(1, p.evaluated),
    prompt_per_second: (p.evaluated * 1000) / promptMs,
    predicted_n: predicted,
    predicted_ms: predictedMs,
    predicted_per_token_ms: predictedMs / Math.max(1, predicted),
    predicted_per_second: (predicted * 1000) / predictedMs,
  };
}

/** `extra`: top-level fields a family adds to a non-streaming reply (radixengine's metrics). */
export async function chatCompletion(fake: FakeBackend, rec: Recorded, res: ServerResponse, extra: object = {}): Promise<void> {
  const model = modelOf(fake, rec);
  const id = `chatcmpl-${fake.name}-${fake.executions}`;
  const b = fake.behaviour;
  const text = fake.replyFor(rec);
  const calls = Array.isArray(rec.json?.tools) && rec.json.tools.length ? fake.toolCalls : [];
  const finish = b.finishReason ?? (calls.length ? 'tool_calls' : 'stop');
  const stopReason = b.stopMatched !== null ? { stop_reason: b.stopMatched } : {};
  const callId = (i: number) => `call_${fake.name}_${i}`;
  // llama.cpp puts them on the non-streamed reply and on the stream's last chunk.
  const timings = fake.family === 'cppengine' ? { timings: llamaTimings(fake, rec, text) } : {};
  if (!rec.json?.stream) {
    const message: Record<string, unknown> = { role: 'assistant', content: text || null };
    if (fake.reasoning) message.reasoning_content = fake.reasoning;
    if (calls.length) message.tool_calls = calls.map((c, i) => ({ id: callId(i), type: 'function', function: { name: c.name, arguments: c.arguments } }));
    sendJson(
      res,
      200,
      {
        id,
        object: 'chat.completion',
        created: CREATED,
        model,
        system_fingerprint: 'fp_fake',
        choices: [{ index: 0, message, logprobs: null, finish_reason: finish, ...stopReason }],
        usage: usage(rec, text),
        ...timings,
        ...extra,
      },
      fake,
    );
    return;
  }
  const chunk = (delta: object, finishReason: string | null, extra: object = {}) =>
    `data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created: CREATED, model, choices: [{ index: 0, delta, logprobs: null, finish_reason: finishReason, ...(finishReason ? stopReason : {}) }], ...extra })}\n\n`;
  const out: string[] = [];
  if (!b.emptyStream) {
    out.push(chunk({ role: 'assistant', content: '' }, null));
    if (fake.reasoning) out.push(...pieces(fake.reasoning).map((p) => chunk({ reasoning_content: p }, null)));
    if (b.malformedChunk) out.push('data: {"this is not": json\n\n');
    // llama.cpp's chat route repeats a prefill at the start of its answer.
    const echo = fake.family === 'cppengine' ? (fake.prefillOf(rec) ?? '') : '';
    if (text) out.push(...pieces(text).map((p, i) => chunk({ content: i === 0 ? echo + p : p }, null)));
    calls.forEach((c, i) => {
      out.push(chunk({ tool_calls: [{ index: i, id: callId(i), type: 'function', function: { name: c.name, arguments: '' } }] }, null));
      // Arguments arrive in small pieces, as real backends send them.
      for (let k = 0; k < c.arguments.length; k += 7)
        out.push(chunk({ tool_calls: [{ index: i, function: { arguments: c.arguments.slice(k, k + 7) } }] }, null));
    });
    const withUsage = rec.json?.stream_options?.include_usage;
    out.push(chunk({}, finish, withUsage ? {} : timings));
    if (withUsage) {
      out.push(
        `data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created: CREATED, model, choices: [], usage: usage(rec, text), ...timings })}\n\n`,
      );
    }
  }
  out.push('data: [DONE]\n\n');
  await fake.writeStream(res, out, 'text/event-stream');
}

/** The messages API itself, for families that declare native support (passthrough). */
export async function nativeMessages(fake: FakeBackend, rec: Recorded, res: ServerResponse): Promise<void> {
  const model = modelOf(fake, rec);
  // llama.cpp reports its prefix cache as the messages API does: input_tokens are those evaluated.
  const p = fake.family === 'cppengine' ? rec.prefill : undefined;
  const input = p ? { cache_read_input_tokens: p.cached, input_tokens: p.evaluated } : { input_tokens: 7 };
  const message = {
    id: `msg_01native${fake.executions}`,
    type: 'message',
    role: 'assistant',
    model,
    content: [{ type: 'text', text: fake.replyFor(rec) }],
    stop_reason: 'end_turn',
    stop_sequence: null,
    usage: { ...input, output_tokens: 5 },
  };
  if (!rec.json?.stream) {
    sendJson(res, 200, message, fake);
    return;
  }
  const ev = (type: string, data: object) => `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`;
  await fake.writeStream(
    res,
    [
      ev('message_start', { message: { ...message, content: [], stop_reason: null, usage: { ...input, output_tokens: 1 } } }),
      ev('content_block_start', { index: 0, content_block: { type: 'text', text: '' } }),
      ...pieces(fake.replyFor(rec)).map((p) => ev('content_block_delta', { index: 0, delta: { type: 'text_delta', text: p } })),
      ev('content_block_stop', { index: 0 }),
      ev('message_delta', { delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: 5 } }),
      ev('message_stop', {}),
    ],
    'text/event-stream',
  );
}

/** The C++ engine's count_tokens: {input_tokens} only. Its own "tokenizer": one token per word of
 *  the system and message text, plus 4 per message for the chat template's markers. */
export function nativeCountTokens(fake: FakeBackend, rec: Recorded, res: ServerResponse): void {
  const words = (v: unknown): number => {
    if (typeof v === 'string') return v.split(/\s+/).filter(Boolean).length;
    if (Array.isArray(v)) return v.reduce((n: number, b) => n + words(b?.type === 'text' ? b.text : b?.content), 0);
    return 0;
  };
  const messages: unknown[] = Array.isArray(rec.json?.messages) ? rec.json.messages : [];
  const tokens = words(rec.json?.system) + messages.reduce((n: number, m) => n + 4 + words((m as { content?: unknown })?.content), 0);
  sendJson(res, 200, { input_tokens: tokens }, fake);
}

export async function completion(fake: FakeBackend, rec: Recorded, res: ServerResponse, extra: object = {}): Promise<void> {
  const model = modelOf(fake, rec);
  const id = `cmpl-${fake.name}-${fake.executions}`;
  const text = fake.replyFor(rec);
  if (!rec.json?.stream) {
    sendJson(
      res,
      200,
      {
        id,
        object: 'text_completion',
        created: CREATED,
        model,
        choices: [{ text, index: 0, logprobs: null, finish_reason: 'stop' }],
        usage: usage(rec, text),
        ...extra,
      },
      fake,
    );
    return;
  }
  const chunk = (t: string, finish: string | null, extra: object = {}) =>
    `data: ${JSON.stringify({ id, object: 'text_completion', created: CREATED, model, choices: [{ text: t, index: 0, logprobs: null, finish_reason: finish }], ...extra })}\n\n`;
  await fake.writeStream(
    res,
    [...pieces(text).map((p) => chunk(p, null)), chunk('', 'stop', { usage: usage(rec, text) }), 'data: [DONE]\n\n'],
    'text/event-stream',
  );
}

/** A deterministic small vector per input string. */
export function vector(input: string): number[] {
  const v = [0, 0, 0, 0, 0, 0, 0, 0];
  for (let i = 0; i < input.length; i++) v[i % 8] += input.charCodeAt(i) / 1000;
  return v.map((x) => Math.round(x * 1e6) / 1e6);
}

/** What the official client asks for by default: little-endian float32s, base64-encoded. */
function base64Vector(v: number[]): string {
  return Buffer.from(new Float32Array(v).buffer).toString('base64');
}

export function embeddings(fake: FakeBackend, rec: Recorded, res: ServerResponse): void {
  const input: string[] = Array.isArray(rec.json?.input) ? rec.json.input : [String(rec.json?.input ?? '')];
  const tokens = input.reduce((n, s) => n + Math.ceil(s.length / 4), 0);
  sendJson(
    res,
    200,
    {
      object: 'list',
      model: modelOf(fake, rec),
      data: input.map((s, index) => ({ object: 'embedding', index, embedding: rec.json?.encoding_format === 'base64' ? base64Vector(vector(s)) : vector(s) })),
      usage: { prompt_tokens: tokens, total_tokens: tokens },
    },
    fake,
  );
}

/** GET /v1/models/{id}: one entry of the common list, or OpenAI's 404 for a model not served. */
export function modelObject(fake: FakeBackend, rec: Recorded, res: ServerResponse, prefix: string): void {
  const id = decodeURIComponent(rec.url.split('?')[0].slice(prefix.length));
  if (!fake.models.some((m) => m.name === id)) {
    sendJson(
      res,
      404,
      { error: { message: `The model '${id}' does not exist`, type: 'invalid_request_error', param: 'model', code: 'model_not_found' } },
      fake,
    );
    return;
  }
  sendJson(res, 200, { id, object: 'model', created: CREATED, owned_by: fake.family }, fake);
}

export type ListFormat =
  | 'common'
  | 'hosted'
  | 'multigateway'
  | 'pagedengine'
  | 'radixengine'
  | 'mlxmulti'
  | 'cppengine'
  | 'deskrunner'
  | 'deskrunner-legacy'
  | 'localrunner'
  | 'npuengine'
  | 'mlxmulti-status';

/** The models loaded now: those marked loaded, else the first (api/ps, v1/models/status). */
export function loadedModels(fake: FakeBackend): FakeModel[] {
  if (fake.gpu) return fake.models.filter((x) => fake.gpu!.held.includes(x.name));
  const marked = fake.models.filter((x) => x.loaded);
  return marked.length ? marked : fake.models.slice(0, 1);
}

/** Each family's model list, with the context window where and how that engine reports it. */
export function modelList(fake: FakeBackend, format: ListFormat): unknown {
  const m = fake.models;
  switch (format) {
    case 'cppengine':
      // llama.cpp's server: an Ollama-style `models` list beside the `data` list whose `meta`
      // carries the trained context (n_ctx_train) and the per-slot serving context (n_ctx), the
      // window a request can use.
      return {
        models: m.map((x) => ({
          name: x.name,
          model: x.name,
          modified_at: '',
          size: '',
          digest: '',
          type: 'model',
          description: '',
          tags: [''],
          capabilities: ['completion'],
          parameters: '',
          details: { parent_model: '', format: 'gguf', family: '', families: [''], parameter_size: '', quantization_level: '' },
        })),
        object: 'list',
        data: m.map((x) => {
          const trained = x.context ?? 4096;
          return {
            id: x.name,
            aliases: [x.name],
            tags: [],
            object: 'model',
            created: CREATED,
            owned_by: 'llamacpp',
            meta: {
              vocab_type: 1,
              n_vocab: 32000,
              n_ctx: x.servingContext ?? trained,
              n_ctx_train: trained,
              n_embd: 4096,
              n_params: 8_030_261_248,
              size: x.size ?? 4_920_734_208,
            },
          };
        }),
      };
    case 'localrunner':
      return {
        models: m.map((x) => ({
          name: x.name,
          model: x.name,
          modified_at: '2026-11-01T10:00:00Z',
          size: x.size ?? 4_000_000_000,
          digest: (x.digest ?? `sha256:${x.name}`).replace(/^sha256:/, ''),
          details: { parent_model: '', format: 'gguf', family: 'llama', families: ['llama'], parameter_size: '8B', quantization_level: 'Q4_K_M' },
        })),
      };
    case 'deskrunner-legacy':
      return {
        models: m.map((x) => ({
          id: x.name,
          object: 'model',
          owned_by: 'organization-owner',
          permission: [],
          engines: { chat_completions: { context_length: x.context ?? 8192, max_tokens: 4096, tokenizer: 'bpe' } },
        })),
      };
    case 'mlxmulti-status': {
      const loaded = loadedModels(fake);
      return {
        model_count: m.length,
        loaded_count: loaded.length,
        models: m.map((x) => ({
          id: x.name,
          loaded: loaded.includes(x),
          is_loading: false,
          pinned: false,
          estimated_size: x.size ?? 2_000_000_000,
          last_access: loaded.includes(x) ? CREATED : null,
        })),
      };
    }
    default:
      return {
        object: 'list',
        data: m.map((x) => ({
          // A multi-provider gateway names the provider in owned_by.
          id: x.name,
          object: 'model',
          created: CREATED,
          owned_by: format === 'multigateway' ? (x.name.includes('/') ? x.name.split('/')[0] : 'openai') : fake.family,
          ...(format === 'hosted' ? { permission: [], root: x.name, parent: null } : {}),
          // Some hosted services name the context window (Groq: context_window), others do not.
          ...(format === 'hosted' && x.context ? { context_window: x.context } : {}),
          // Multi-provider gateways that report it say context_length (OpenRouter).
          ...(format === 'multigateway' && x.context ? { context_length: x.context } : {}),
          ...(format === 'pagedengine' || format === 'radixengine' || format === 'mlxmulti' ? { max_model_len: x.context ?? 32768 } : {}),
          ...(format === 'radixengine' ? { radix_cache_size: 2_147_483_648, speculative_decoding: fake.speculativeDecoding } : {}),
          ...(format === 'deskrunner' ? { max_context_length: x.context ?? 8192 } : {}),
          ...(format === 'npuengine' ? { checkpoint: `org/${x.name}-onnx`, recipe: 'oga-npu' } : {}),
        })),
      };
  }
}
