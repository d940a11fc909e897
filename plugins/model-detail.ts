// GET /gw/models/{id}: one unified record, by model id (or any name it is served under) or by
// alias (the record of its first target that is served).
import { gwError } from '../engine/kernel/errors.js';
import { definePlugin } from '../engine/kernel/plugin.js';
import { unifiedRecord } from './lib/model-formats.js';

const PREFIX = '/gw/models/';

export default definePlugin<Record<string, never>>({
  name: 'model-detail',
  terminal: true,
  schema: { type: 'object', additionalProperties: false },
  apply(hooks, _o, env) {
    const { catalogue } = env;
    // A Map: the id comes from the request, and "__proto__" or "constructor" must read as names.
    const aliases = new Map(Object.entries(env.config.model_aliases));
    hooks.dispatch.tap('model-detail', (ctx) => {
      let id: string;
      try {
        id = decodeURIComponent(ctx.pathname.slice(PREFIX.length));
      } catch {
        throw gwError('BAD_REQUEST', { reason: 'the model id is not valid percent-encoding' });
      }
      const all = catalogue.all();
      const byName = (name: string) => all.find((m) => m.id === name) ?? all.find((m) => m.names.includes(name));
      const targets = aliases.get(id);
      const found = targets ? targets.map(byName).find(Boolean) : byName(id);
      if (!found) throw gwError('MODEL_NOT_FOUND', { model: id, hint: 'GET /gw/models lists what is served' });
      return ctx.replyJson(200, targets ? { ...unifiedRecord(found), alias: id } : unifiedRecord(found));
    });
  },
});
