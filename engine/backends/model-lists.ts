// Model lists as each family's backend returns them, read into one shape. The parser is
// tolerant: `models` (native runner, legacy desktop list, multi-model status) or `data` arrays,
// with whatever extras the family adds (max_model_len, context lengths, digests, recipes).
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

function engineInfo(raw: Raw): { context?: number; maxTokens?: number } {
  const engines = raw.engines as Record<string, Raw> | undefined;
  const e = engines?.chat_completions ?? engines?.completions;
  return e ? { context: num(e.context_length), maxTokens: num(e.max_tokens) } : {};
}

function one(raw: Raw): DiscoveredModel | null {
  const name = str(raw.name) ?? str(raw.id) ?? str(raw.model);
  if (!name) return null;
  const details = (raw.details && typeof raw.details === 'object' ? raw.details : {}) as Raw;
  const engine = engineInfo(raw);
  const digest = str(raw.digest);
  const extras: Raw = {};
  for (const k of ['max_model_len', 'radix_cache_size', 'speculative_decoding', 'checkpoint', 'recipe', 'permission', 'root', 'parent', 'pinned', 'estimated_size', 'publisher', 'arch', 'quantization', 'state']) {
    if (raw[k] !== undefined) extras[k] = raw[k];
  }
  return {
    name,
    digest: digest ? (digest.includes(':') ? digest : `sha256:${digest}`) : undefined,
    size: num(raw.size) ?? num(raw.estimated_size),
    modified: str(raw.modified_at),
    created: num(raw.created),
    ownedBy: str(raw.owned_by),
    context: num(raw.max_model_len) ?? num(raw.max_context_length) ?? num(raw.context_length) ?? engine.context,
    maxTokens: engine.maxTokens,
    kind: str(raw.type),
    loaded: bool(raw.loaded) ?? (raw.state === 'loaded' ? true : raw.state === 'not-loaded' ? false : undefined),
    isLoading: bool(raw.is_loading),
    details: { ...details, ...extras },
  };
}

/** A model-list reply the gateway cannot use; the message says why. */
export class ModelListError extends Error {}

/** Parse a model-list reply; throws when it is not a list the gateway can read. */
export function parseModelList(body: unknown): DiscoveredModel[] {
  const b = body as Raw | unknown[] | null;
  const list = Array.isArray(b) ? b : Array.isArray((b as Raw)?.models) ? (b as Raw).models : Array.isArray((b as Raw)?.data) ? (b as Raw).data : null;
  if (!list) throw new ModelListError('the model list has neither a "models" nor a "data" array');
  const out: DiscoveredModel[] = [];
  for (const item of list as unknown[]) {
    const m = item && typeof item === 'object' ? one(item as Raw) : typeof item === 'string' ? one({ id: item }) : null;
    if (m) out.push(m);
  }
  return out;
}
