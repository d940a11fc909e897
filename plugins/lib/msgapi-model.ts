// A model as the messages API's model routes show it: the spec's record (id, name, created,
// description, type "chat") with the fields the official SDK reads (display_name, created_at),
// for the chat models that some routable endpoint serves now (every family, one entry per id).
import type { CatalogueModel } from '../../engine/backends/catalogue.js';
import type { PluginEnv } from '../../engine/kernel/plugin.js';
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
  const d = m.servedAs.get(m.endpoints[0])!;
  const created = d.created ?? (d.modified ? Math.floor(Date.parse(d.modified) / 1000) || 0 : 0);
  return {
    id: m.id, name: m.id, created, description: `${m.family} model served by ${m.endpoints.map((e) => e.name).join(', ')}`, type: 'chat',
    display_name: m.id, created_at: new Date(created * 1000).toISOString(),
  };
}

/** The live chat models, rebuilt only when the catalogue or endpoint health changed. */
export function msgapiModels(env: Pick<PluginEnv, 'catalogue' | 'endpoints'>): LiveCache<{ list: MsgapiModel[]; byName: Map<string, MsgapiModel> }> {
  return new LiveCache(env, () => {
    const list: MsgapiModel[] = [];
    const byName = new Map<string, MsgapiModel>();
    for (const m of liveModels(env.catalogue.all())) {
      if (m.embedding || byName.has(m.id)) continue;
      const r = record(m);
      list.push(r);
      for (const name of m.names) if (!byName.has(name)) byName.set(name, r);
    }
    return { list, byName };
  });
}
