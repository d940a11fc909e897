// GET /gw/models/{id}: one unified record, as GET /gw/models lists it, by any name a model is
// listed under (the catalogue's lookup rule: engine/backends/model-names.ts) or by alias (its
// entry of the first family serving one of its targets, catalogue/alias-entries.ts); 404 for a
// name nothing serves, 503 NO_ENDPOINTS while no endpoint is routable (as the lists).
import { definePlugin, gwError, indexModels } from '../engine/api.js';
import { noEndpointsError } from './routing/unavailable-hint.js';
import { sees } from './access/visible.js';
import { withAliases } from './catalogue/alias-entries.js';
import { LiveCache } from './catalogue/live-models.js';
import { decodeModelId } from './catalogue/model-id.js';
import { unifiedRecord } from './catalogue/model-formats.js';
import { modelNames } from './routing/model-chains.js';

const PREFIX = '/gw/models/';

export default definePlugin<Record<string, never>>({
  name: 'model-detail',
  terminal: true,
  schema: { type: 'object', additionalProperties: false },
  apply(hooks, _o, env) {
    const { catalogue } = env;
    const aliases = modelNames(env.config).all;
    const index = new LiveCache(env, () => indexModels(withAliases(catalogue.all(), aliases)));
    hooks.dispatch.tap('model-detail', (ctx) => {
      const id = decodeModelId(ctx.pathname.slice(PREFIX.length));
      const found = index.get().find(id);
      if (!found || !sees(ctx, id, found.value.id))
        throw noEndpointsError(env) ?? gwError('MODEL_NOT_FOUND', { model: id, hint: 'GET /gw/models lists what is served' });
      return ctx.replyJson(200, unifiedRecord(found.value));
    });
  },
});
