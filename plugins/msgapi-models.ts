// GET /gw/msgapi/v1/models: the catalogue's chat models (every family, one entry per id) in
// the messages API's list form.
import { definePlugin } from '../engine/kernel/plugin.js';

export default definePlugin<Record<string, never>>({
  name: 'msgapi-models',
  terminal: true,
  schema: { type: 'object', additionalProperties: false },
  apply(hooks, _o, env) {
    hooks.dispatch.tap('msgapi-models', (ctx) => {
      const seen = new Set<string>();
      const data = [];
      for (const m of env.catalogue.all()) {
        if (m.embedding || seen.has(m.id)) continue;
        seen.add(m.id);
        const d = m.servedAs.get(m.endpoints[0])!;
        data.push({ id: m.id, name: m.id, created: d.created ?? (d.modified ? Math.floor(Date.parse(d.modified) / 1000) || 0 : 0), description: `${m.family} model served by ${m.endpoints.map((e) => e.name).join(', ')}`, type: 'chat' });
      }
      return ctx.replyJson(200, { data, has_more: false, first_id: data[0]?.id ?? null, last_id: data.at(-1)?.id ?? null });
    });
  },
});
