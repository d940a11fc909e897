// Model-listing routes that the family's profile declares as intercepts (api.intercepts) are
// answered by the gateway from its catalogue, aggregating every healthy endpoint of the family,
// in that family's format; the backend is not contacted.
import { gwError } from '../engine/kernel/errors.js';
import { definePlugin } from '../engine/kernel/plugin.js';
import { renderList } from './lib/model-formats.js';

export default definePlugin<Record<string, never>>({
  name: 'intercept-models',
  needs: ['path'],
  needsProfile: true,
  schema: { type: 'object', additionalProperties: false },
  apply(hooks, _o, env) {
    const profile = env.profile!;
    const intercepts = new Map(profile.api.intercepts.map((i) => [i.path, i.format]));
    if (intercepts.size === 0) return;
    const { catalogue, endpoints } = env;
    hooks.request.tap('intercept-models', (ctx) => {
      const format = ctx.req.method === 'GET' || ctx.req.method === 'HEAD' ? intercepts.get(ctx.pathname) : undefined;
      if (!format) return;
      if (endpoints.routable(profile.name).length === 0) throw gwError('ENDPOINT_UNAVAILABLE', { provider: profile.name });
      return ctx.replyJson(200, renderList(format, catalogue.family(profile.name).models));
    });
  },
});
