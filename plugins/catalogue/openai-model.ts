// A model as the OpenAI-compatible front (/gw/openai/v1) lists it: the chat-completions list form
// (id, object, created, owned_by) for every model some routable endpoint serves now, across every
// family, one entry per id — a model served by several families once, `families` naming them —
// sorted by id so the list reads the same on every call. Aliases (catalogue/alias-entries.ts) are
// entries of their own with `alias_of`; the context window (the first family's) is `context_length`.
import { NameIndex, type PluginEnv } from '../../engine/api.js';
import { withAliases } from './alias-entries.js';
import { createdOf, ownedBy, type ListedModel } from './model-formats.js';
import { LiveCache, liveModels } from './live-models.js';
import { modelNames } from '../routing/model-chains.js';

export interface OpenAiModel {
  id: string;
  object: 'model';
  created: number;
  owned_by: string;
  /** The families serving it (an extension: every client ignores what it does not know). */
  families: string[];
  context_length: number;
  alias_of?: readonly string[];
}

function record(m: ListedModel): OpenAiModel {
  const r: OpenAiModel = { id: m.id, object: 'model', created: createdOf(m), owned_by: ownedBy(m), families: [m.family], context_length: m.contextWindow };
  if (m.aliasOf) r.alias_of = m.aliasOf;
  return r;
}

/** The live models, by every name they are listed under (the catalogue's lookup rule), rebuilt
 *  only when the catalogue or endpoint health changed. */
export function openaiModels(env: Pick<PluginEnv, 'catalogue' | 'endpoints' | 'config'>): LiveCache<{ list: OpenAiModel[]; byName: NameIndex<OpenAiModel> }> {
  const aliases = modelNames(env.config).all;
  return new LiveCache(env, () => {
    const byId = new Map<string, OpenAiModel>();
    const byName = new NameIndex<OpenAiModel>();
    for (const m of withAliases(liveModels(env.catalogue.all()), aliases)) {
      let r = byId.get(m.id);
      if (!r) byId.set(m.id, (r = record(m)));
      else if (!r.families.includes(m.family)) r.families.push(m.family);
      for (const name of m.names) byName.add(name, r, m.endpoints[0].profile.models);
    }
    const list = [...byId.values()].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    return { list, byName };
  });
}
