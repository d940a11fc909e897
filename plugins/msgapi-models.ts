// GET /gw/msgapi/v1/models: the chat models some routable endpoint serves (every family, one
// entry per id) in the messages API's list form; 503 NO_ENDPOINTS, as /gw/models, while no endpoint
// is routable.
import { definePlugin } from '../engine/api.js';
import { visible } from './access/visible.js';
import { msgapiModels } from './catalogue/msgapi-model.js';
import { noEndpointsError } from './routing/unavailable-hint.js';

export default definePlugin<Record<string, never>>({
  name: 'msgapi-models',
  terminal: true,
  schema: { type: 'object', additionalProperties: false },
  apply(hooks, _o, env) {
    const models = msgapiModels(env);
    hooks.dispatch.tap('msgapi-models', (ctx) => {
      const down = noEndpointsError(env);
      if (down) throw down;
      const list = visible(ctx, models.get().list);
      return ctx.replyJson(200, { data: list, has_more: false, first_id: list[0]?.id ?? null, last_id: list.at(-1)?.id ?? null });
    });
  },
});
