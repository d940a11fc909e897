// GET /gw/openai/v1/models and /gw/openai/v1/models/{id}: every model some routable endpoint
// serves now, across every family, in the OpenAI list form (catalogue/openai-model.ts) — what a client
// pointed at the one base URL /gw/openai/v1 sees. One model by any name it is listed under (a
// slash in the id written plainly or encoded); 404 MODEL_NOT_FOUND when none serves it; 503
// NO_ENDPOINTS, as /gw/models, while no endpoint is routable.
import { definePlugin, gwError } from '../engine/api.js';
import { sees, visible } from './access/visible.js';
import { decodeModelId } from './catalogue/model-id.js';
import { openaiModels } from './catalogue/openai-model.js';
import { noEndpointsError } from './routing/unavailable-hint.js';

const LIST = '/gw/openai/v1/models';

export default definePlugin<Record<string, never>>({
  name: 'openai-models',
  terminal: true,
  schema: { type: 'object', additionalProperties: false },
  apply(hooks, _o, env) {
    const models = openaiModels(env);
    hooks.dispatch.tap('openai-models', (ctx) => {
      const { list, byName } = models.get();
      if (ctx.pathname === LIST || ctx.pathname === `${LIST}/`) {
        const down = noEndpointsError(env);
        if (down) throw down;
        return ctx.replyJson(200, { object: 'list', data: visible(ctx, list) });
      }
      const id = decodeModelId(ctx.pathname.slice(LIST.length + 1));
      const found = byName.find(id);
      if (!found || !sees(ctx, id, found.value.id))
        throw noEndpointsError(env) ?? gwError('MODEL_NOT_FOUND', { model: id, hint: `GET ${LIST} lists the models served now` });
      return ctx.replyJson(200, found.value);
    });
  },
});
