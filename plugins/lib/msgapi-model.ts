// A model as the messages API's model routes show it: the spec's record (id, name, created,
// description, type "chat") with the fields the official SDK reads (display_name, created_at),
// for the chat models that some routable endpoint serves now (every family, one entry per id).
import type { CatalogueModel } from '../../engine/backends/catalogue.js';
import { NameIndex } from '../../engine/backends/model-names.js';
import type { PluginEnv } from '../../engine/kernel/plugin.js';
import { createdOf } from './model-formats.js';
import { LiveCache, liveModels } from './live-models.js';

export interface MsgapiModel {
  id: string;
  name: string;
  created: number;
  description: string;
  type: 'chat';
  display_name: string;
  created_at: string;
}

function record(m: CatalogueModel): MsgapiModel {
  const created = createdOf(m);
  return {
    id: m.id, name: m.id, created, description: `${m.family} model served by ${m.endpoints.map((e) => e.name).join(', ')}`, type: 'chat',
    display_name: m.id, created_at: new Date(created * 1000).toISOString(),
  };
}

/** The live chat models, by every name they are listed under (the catalogue's lookup rule),
 *  rebuilt only when the catalogue or endpoint health changed. */
export function msgapiModels(env: Pick<PluginEnv, 'catalogue' | 'endpoints'>): LiveCache<{ list: MsgapiModel[]; byName: NameIndex<MsgapiModel> }> {
  return new LiveCache(env, () => {
    const list: MsgapiModel[] = [];
    const byName = new NameIndex<MsgapiModel>();
    const listed = new Set<string>();
    for (const m of liveModels(env.catalogue.all())) {
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
