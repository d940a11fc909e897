// A model as the messages API's model routes show it: the spec's record (id, name, created,
// description, type "chat") with the fields the official SDK reads (display_name, created_at),
// for the chat models that some routable endpoint serves now (every family, one entry per id),
// and the aliases of them (catalogue/alias-entries.ts), with `alias_of`.
import { NameIndex, type PluginEnv } from '../../engine/api.js';
import { withAliases } from './alias-entries.js';
import { createdOf, type ListedModel } from './model-formats.js';
import { LiveCache, liveModels } from './live-models.js';
import { modelNames } from '../routing/model-chains.js';

export interface MsgapiModel {
  id: string;
  name: string;
  created: number;
  description: string;
  type: 'chat';
  display_name: string;
  created_at: string;
  alias_of?: readonly string[];
}

function record(m: ListedModel): MsgapiModel {
  const created = createdOf(m);
  const served = `${m.family} model served by ${m.endpoints.map((e) => e.name).join(', ')}`;
  const r: MsgapiModel = {
    id: m.id,
    name: m.id,
    created,
    description: m.aliasOf ? `alias of ${m.aliasOf.join(', ')}: ${served}` : served,
    type: 'chat',
    display_name: m.id,
    created_at: new Date(created * 1000).toISOString(),
  };
  if (m.aliasOf) r.alias_of = m.aliasOf;
  return r;
}

/** The live chat models, by every name they are listed under (the catalogue's lookup rule),
 *  rebuilt only when the catalogue or endpoint health changed. */
export function msgapiModels(env: Pick<PluginEnv, 'catalogue' | 'endpoints' | 'config'>): LiveCache<{ list: MsgapiModel[]; byName: NameIndex<MsgapiModel> }> {
  const aliases = modelNames(env.config).all;
  return new LiveCache(env, () => {
    const list: MsgapiModel[] = [];
    const byName = new NameIndex<MsgapiModel>();
    const listed = new Set<string>();
    for (const m of withAliases(liveModels(env.catalogue.all()), aliases)) {
      // One entry per id: a model of another family under a name already listed is left out.
      if (m.embedding || listed.has(m.id)) continue;
      const r = record(m);
      list.push(r);
      for (const name of m.names) {
        listed.add(name);
        byName.add(name, r, m.endpoints[0].profile.models);
      }
    }
    return { list, byName };
  });
}
