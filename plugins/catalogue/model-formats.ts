// Catalogue models in the formats clients expect: the unified record, the catalogue record (the
// spec's other form of it), the chat-completions list ("common"), and the native list shapes of
// the runner, desktop and paged families. An alias entry (catalogue/alias-entries.ts) carries
// `alias_of` (its targets): in `metadata` of the unified forms (their keys are the spec's), as a
// field of the item in the others.
import type { CatalogueModel, DiscoveredModel } from '../../engine/api.js';

/** A model as a list shows it: a catalogue model, or an alias of some (`aliasOf`: its targets). */
export interface ListedModel extends CatalogueModel {
  aliasOf?: readonly string[];
}

export const LIST_FORMATS = ['unified', 'catalogue', 'common', 'localrunner', 'deskrunner', 'pagedengine'] as const;
export type ListFormat = (typeof LIST_FORMATS)[number] | 'npuengine' | 'deskrunner-legacy';

const first = (m: CatalogueModel): DiscoveredModel => m.servedAs.get(m.endpoints[0])!;

/** A best-effort owner label: the backend's, else the part before "/", else the leading hyphen-separated segment. */
export function ownedBy(m: ListedModel): string {
  const d = first(m);
  if (d.ownedBy) return d.ownedBy;
  // An alias is owned as its first target is.
  const id = m.aliasOf ? d.name : m.id;
  if (id.includes('/')) return id.split('/')[0];
  return id.includes('-') ? id.split('-')[0] : m.family;
}

/** The item, with `alias_of` when the model is an alias. */
const marked = <T extends object>(m: ListedModel, item: T): T => (m.aliasOf ? { ...item, alias_of: m.aliasOf } : item);

/** When the model was made, in Unix seconds, as its first endpoint reported it (`created`, else
 *  `modified`); 0 when unknown. */
export function createdOf(m: CatalogueModel): number {
  const d = first(m);
  if (d.created) return d.created;
  const t = d.modified ? Date.parse(d.modified) : NaN;
  return Number.isNaN(t) ? 0 : Math.floor(t / 1000);
}

function tokenizerOf(m: CatalogueModel): string | null {
  const t = (first(m).details as Record<string, unknown>).tokenizer;
  return typeof t === 'string' && t ? t : null;
}

export function capabilities(m: CatalogueModel): string[] {
  return m.embedding ? ['embedding'] : m.vision ? ['chat', 'completion', 'vision'] : ['chat', 'completion'];
}

/** The spec's unified record: one endpoint (the first serving it), capabilities as a list. The
 *  names of every endpoint serving it are in metadata.endpoints. */
export function unifiedRecord(m: ListedModel) {
  const d = first(m);
  const det = d.details as Record<string, unknown>;
  const metadata: Record<string, unknown> = {};
  const put = (k: string, v: unknown) => {
    if (v !== undefined && v !== null && v !== '') metadata[k] = v;
  };
  put('size', d.size);
  put('modified', d.modified);
  put('family', det.family);
  put('parameter_size', det.parameter_size);
  put('quantization', det.quantization_level ?? det.quantization);
  put('loaded', d.loaded);
  put('is_loading', d.isLoading);
  put('digest', m.digest);
  put('code', m.code || undefined);
  // n_ctx (llama.cpp) and loaded_context_length (LM Studio): the context the server runs with now;
  // n_ctx_train (llama.cpp): the context the model was trained for.
  for (const k of ['checkpoint', 'recipe', 'max_model_len', 'n_ctx', 'n_ctx_train', 'loaded_context_length', 'radix_cache_size', 'speculative_decoding'])
    put(k, det[k]);
  if (m.names.length > 1) metadata.aliases = m.names.slice(1);
  if (m.aliasOf) metadata.alias_of = m.aliasOf;
  metadata.endpoints = m.endpoints.map((e) => e.name);
  return {
    id: m.id,
    name: m.id,
    provider: m.family,
    endpoint: m.endpoints[0].name,
    capabilities: capabilities(m),
    context_window: m.contextWindow,
    max_tokens: m.maxTokens,
    vision: m.vision,
    embedding: m.embedding,
    available: m.endpoints.some((e) => e.routable),
    metadata,
  };
}

/** The spec's other form of the record: every endpoint serving it, capabilities as booleans,
 *  `context_length` and `created`. */
export function catalogueRecord(m: ListedModel) {
  const { metadata } = unifiedRecord(m);
  delete metadata.endpoints;
  const generates = !m.embedding;
  return {
    id: m.id,
    name: m.id,
    provider: m.family,
    endpoints: m.endpoints.map((e) => e.name),
    capabilities: { chat: generates, completion: generates, embeddings: m.embedding, vision: m.vision },
    context_length: m.contextWindow,
    max_tokens: m.maxTokens,
    available: m.endpoints.some((e) => e.routable),
    created: createdOf(m),
    metadata,
  };
}

/** Per-model fields a caller adds to every item (an intercept's context_field and fields). */
export type ItemExtras = (m: CatalogueModel) => Record<string, unknown>;
const none: ItemExtras = () => ({});

function commonItem(m: ListedModel) {
  return marked(m, { id: m.id, object: 'model', created: createdOf(m), owned_by: ownedBy(m) });
}

function deskrunnerItem(m: ListedModel) {
  return marked(m, {
    id: m.id,
    object: 'model',
    owned_by: ownedBy(m),
    permission: [],
    // One engine: chat_completions for models that chat, completions for the others (embedding
    // models); the tokenizer when the backend named one, else null.
    engines: { [m.embedding ? 'completions' : 'chat_completions']: { context_length: m.contextWindow, max_tokens: m.maxTokens, tokenizer: tokenizerOf(m) } },
  });
}

/** The native runner lists every tag, even tags of the same weights: one entry per name. */
function localrunnerItems(m: ListedModel) {
  return m.names.map((name) => {
    const ep = m.endpoints.find((e) => m.servedAs.get(e)!.name === name) ?? m.endpoints[0];
    const d = m.servedAs.get(ep)!;
    const det = d.details as Record<string, unknown>;
    return marked(m, {
      name,
      model: name,
      modified_at: d.modified ?? new Date(createdOf(m) * 1000).toISOString(),
      size: d.size ?? 0,
      digest: (m.digest ?? '').replace(/^sha256:/, ''),
      details: {
        parent_model: det.parent_model ?? '',
        format: det.format ?? '',
        family: det.family ?? '',
        families: det.families ?? null,
        parameter_size: det.parameter_size ?? '',
        quantization_level: det.quantization_level ?? det.quantization ?? '',
      },
    });
  });
}

export function renderList(format: ListFormat, models: readonly ListedModel[], extras: ItemExtras = none): unknown {
  switch (format) {
    case 'unified': {
      const providers: Record<string, number> = {};
      for (const m of models) providers[m.family] = (providers[m.family] ?? 0) + 1;
      return { models: models.map(unifiedRecord), total: models.length, providers };
    }
    case 'catalogue':
      return { models: models.map(catalogueRecord) };
    case 'common':
      return { object: 'list', data: models.map((m) => ({ ...commonItem(m), ...extras(m) })) };
    case 'pagedengine':
      return { object: 'list', data: models.map((m) => ({ ...commonItem(m), max_model_len: m.contextWindow, ...extras(m) })) };
    case 'npuengine':
      return {
        object: 'list',
        data: models.map((m) => {
          const det = first(m).details as Record<string, unknown>;
          return { ...commonItem(m), checkpoint: det.checkpoint ?? m.id, recipe: det.recipe ?? null, ...extras(m) };
        }),
      };
    case 'localrunner':
      return { models: models.flatMap((m) => localrunnerItems(m).map((item) => ({ ...item, ...extras(m) }))) };
    case 'deskrunner':
      return { data: models.map((m) => ({ ...deskrunnerItem(m), ...extras(m) })) };
    case 'deskrunner-legacy':
      return { models: models.map((m) => ({ ...deskrunnerItem(m), ...extras(m) })) };
  }
}

/** One model as the list format renders it (the first item of its list). */
export function renderItem(format: Exclude<ListFormat, 'unified'>, m: ListedModel, extras: ItemExtras = none): unknown {
  const list = renderList(format, [m], extras) as { data?: unknown[]; models?: unknown[] };
  return (list.data ?? list.models)![0];
}
