// Model lists as each family's backend returns them, read into one shape. The parser is
// tolerant: `models` (native runner, legacy desktop list, multi-model status) or `data` arrays,
// with whatever extras the family adds (max_model_len, context lengths, digests, recipes).
//
// The context window is what the engine reports, in its own words (first found wins):
//   vLLM, SGLang, mlx multi-model, lmdeploy   max_model_len
//   LM Studio (v1 and api/v0)                 max_context_length (loaded_context_length kept as detail)
//   LM Studio legacy list                     engines.{chat_completions|completions}.context_length
//   hosted services, multi-provider gateways  context_length (OpenRouter), context_window (Groq)
//   llama.cpp server                          meta.n_ctx: the context each slot serves (what one
//                                             request can use: -c 2048 with 2 slots serves 1024,
//                                             as /props' default_generation_settings.n_ctx says);
//                                             an older server without it: meta.n_ctx_train, the
//                                             trained context (kept as detail n_ctx_train)
// Ollama's api/tags has none: discovery asks its api/show per model (model-info.ts).
export interface DiscoveredModel {
  /** The name the backend uses: what routing matches and what an alias rewrite sends. */
  name: string;
  digest?: string;
  size?: number;
  modified?: string;
  created?: number;
  ownedBy?: string;
  /** Context window the backend reports, if it reports one. */
  context?: number;
  maxTokens?: number;
  /** Backend-declared kind: llm, vlm, embeddings. */
  kind?: string;
  loaded?: boolean;
  isLoading?: boolean;
  details: Record<string, unknown>;
}

type Raw = Record<string, unknown>;
const str = (v: unknown) => (typeof v === 'string' && v ? v : undefined);
const num = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) ? v : undefined);
const bool = (v: unknown) => (typeof v === 'boolean' ? v : undefined);

function engineInfo(raw: Raw): { context?: number; maxTokens?: number; tokenizer?: unknown } {
  const engines = raw.engines as Record<string, Raw> | undefined;
  const e = engines?.chat_completions ?? engines?.completions;
  return e ? { context: num(e.context_length), maxTokens: num(e.max_tokens), tokenizer: e.tokenizer } : {};
}

/** llama.cpp's per-model `meta`: the trained context, and the serving context per slot. */
function llamaMeta(raw: Raw): { trained?: number; serving?: number; size?: number; params?: number } {
  const meta = raw.meta && typeof raw.meta === 'object' ? (raw.meta as Raw) : undefined;
  return meta ? { trained: num(meta.n_ctx_train), serving: num(meta.n_ctx), size: num(meta.size), params: num(meta.n_params) } : {};
}

const EXTRAS = [
  'max_model_len',
  'max_context_length',
  'loaded_context_length',
  'radix_cache_size',
  'speculative_decoding',
  'checkpoint',
  'recipe',
  'permission',
  'root',
  'parent',
  'pinned',
  'estimated_size',
  'publisher',
  'arch',
  'quantization',
  'state',
  'tokenizer',
];

function one(raw: Raw): DiscoveredModel | null {
  const name = str(raw.name) ?? str(raw.id) ?? str(raw.model);
  if (!name) return null;
  const details = (raw.details && typeof raw.details === 'object' ? raw.details : {}) as Raw;
  const engine = engineInfo(raw);
  const llama = llamaMeta(raw);
  const digest = str(raw.digest);
  const extras: Raw = {};
  for (const k of EXTRAS) if (raw[k] !== undefined) extras[k] = raw[k];
  if (engine.tokenizer !== undefined) extras.tokenizer = engine.tokenizer;
  if (llama.serving !== undefined) extras.n_ctx = llama.serving;
  if (llama.trained !== undefined) extras.n_ctx_train = llama.trained;
  if (llama.params !== undefined) extras.n_params = llama.params;
  return {
    name,
    digest: digest ? (digest.includes(':') ? digest : `sha256:${digest}`) : undefined,
    size: num(raw.size) ?? num(raw.estimated_size) ?? llama.size,
    modified: str(raw.modified_at),
    created: num(raw.created),
    ownedBy: str(raw.owned_by),
    context:
      num(raw.max_model_len) ??
      num(raw.max_context_length) ??
      num(raw.context_length) ??
      num(raw.context_window) ??
      llama.serving ??
      llama.trained ??
      engine.context,
    maxTokens: engine.maxTokens,
    kind: str(raw.type),
    loaded: bool(raw.loaded) ?? loadedState(raw),
    isLoading: bool(raw.is_loading) ?? (statusOf(raw) === 'loading' ? true : undefined),
    details: { ...details, ...extras },
  };
}

/** llama-server's router: each model's `status.value` (loaded, loading, unloaded). */
const statusOf = (raw: Raw): unknown => (raw.status && typeof raw.status === 'object' ? (raw.status as Raw).value : undefined);

/** Whether the model is loaded, where the entry says so in words: LM Studio's `state`
 *  (loaded, not-loaded), llama-swap's running list (`state`: ready, starting…) and llama-server's
 *  router (`status.value`). */
function loadedState(raw: Raw): boolean | undefined {
  const word = raw.state ?? statusOf(raw);
  if (word === 'loaded' || word === 'ready') return true;
  if (word === 'not-loaded' || word === 'unloaded' || word === 'loading' || word === 'starting') return false;
  return undefined;
}

/** A model-list reply the gateway cannot use; the message says why. */
export class ModelListError extends Error {}

/** Parse a model-list reply; throws when it is not a list the gateway can read. The profile's
 *  `request.response_format` says which array comes first when a reply has both (llama.cpp sends
 *  an Ollama-style `models` beside the `data` that carries its metadata): `models` for the
 *  native runner format, `data` for every other. */
export function parseModelList(body: unknown, format = 'common'): DiscoveredModel[] {
  const b = body as Raw | unknown[] | null;
  const models = Array.isArray((b as Raw)?.models) ? (b as Raw).models : null;
  const data = Array.isArray((b as Raw)?.data) ? (b as Raw).data : null;
  // llama-swap's GET /running: the models it runs now.
  const running = Array.isArray((b as Raw)?.running) ? (b as Raw).running : null;
  const list = Array.isArray(b) ? b : format === 'localrunner' ? (models ?? data ?? running) : (data ?? models ?? running);
  if (!list) throw new ModelListError('the model list has neither a "models" nor a "data" array (nor llama-swap\'s "running")');
  const out: DiscoveredModel[] = [];
  for (const item of list as unknown[]) {
    const m = item && typeof item === 'object' ? one(item as Raw) : typeof item === 'string' ? one({ id: item }) : null;
    if (m) out.push(m);
  }
  return out;
}
