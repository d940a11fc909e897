// GET /gw/models/{id}: one unified record, by any name a model is listed under (the catalogue's
// lookup rule: engine/backends/model-names.ts) or by alias (the record of its first target that
// is listed).
import { gwError } from '../engine/core/errors.js';
import { definePlugin } from '../engine/kernel/plugin.js';
import { decodeModelId } from './lib/model-id.js';
import { unifiedRecord } from './lib/model-formats.js';
import { modelNames } from './lib/model-chains.js';

const PREFIX = '/gw/models/';

export default definePlugin<Record<string, never>>({
  name: 'model-detail',
  terminal: true,
  schema: { type: 'object', additionalProperties: false },
  apply(hooks, _o, env) {
    const { catalogue } = env;
    const aliases = modelNames(env.config).all;
    hooks.dispatch.tap('model-detail', (ctx) => {
      const id = decodeModelId(ctx.pathname.slice(PREFIX.length));
      const targets = aliases.get(id);
      const found = targets ? targets.map((t) => catalogue.find(t)).find(Boolean) : catalogue.find(id);
      if (!found) throw gwError('MODEL_NOT_FOUND', { model: id, hint: 'GET /gw/models lists what is served' });
      const record = unifiedRecord(found.value);
      return ctx.replyJson(200, targets ? { ...record, alias: id } : record);
    });
  },
});
