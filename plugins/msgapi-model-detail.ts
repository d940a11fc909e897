// GET /gw/msgapi/v1/models/{id}: one chat model of the messages API's list, by any name it is
// listed under (the catalogue's lookup rule; a slash in the id is written plainly); 404 in the
// messages API's error shape when no routable endpoint serves it (503 NO_ENDPOINTS while none is routable).
import { definePlugin, gwError } from '../engine/api.js';
import { noEndpointsError } from './routing/unavailable-hint.js';
import { sees } from './access/visible.js';
import { decodeModelId } from './catalogue/model-id.js';
import { msgapiModels } from './catalogue/msgapi-model.js';

const PREFIX = '/gw/msgapi/v1/models/';

export default definePlugin<Record<string, never>>({
  name: 'msgapi-model-detail',
  terminal: true,
  schema: { type: 'object', additionalProperties: false },
  apply(hooks, _o, env) {
    const models = msgapiModels(env);
    hooks.dispatch.tap('msgapi-model-detail', (ctx) => {
      const id = decodeModelId(ctx.pathname.slice(PREFIX.length));
      const found = models.get().byName.find(id);
      if (!found || !sees(ctx, id, found.value.id))
        throw noEndpointsError(env) ?? gwError('MODEL_NOT_FOUND', { model: id, hint: 'GET /gw/msgapi/v1/models lists the chat models served now' });
      return ctx.replyJson(200, found.value);
    });
  },
});
