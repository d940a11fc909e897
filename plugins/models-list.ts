// GET /gw/models: the unified catalogue and the aliases it can serve (catalogue/alias-entries.ts),
// filtered by provider and capability, in one of the list formats (unified, common, localrunner,
// deskrunner, pagedengine).
import { definePlugin, gwError } from '../engine/api.js';
import { visible } from './access/visible.js';
import { withAliases } from './catalogue/alias-entries.js';
import { LiveCache } from './catalogue/live-models.js';
import { modelNames } from './routing/model-chains.js';
import { LIST_FORMATS, capabilities, renderList, type ListFormat } from './catalogue/model-formats.js';
import { queryOf } from './lib/query.js';
import { noEndpointsError } from './routing/unavailable-hint.js';

const CAPABILITIES = new Set(['chat', 'completion', 'embedding', 'vision']);

export default definePlugin<Record<string, never>>({
  name: 'models-list',
  terminal: true,
  schema: { type: 'object', additionalProperties: false },
  apply(hooks, _o, env) {
    const { catalogue, profiles } = env;
    const aliases = modelNames(env.config).all;
    const listed = new LiveCache(env, () => withAliases(catalogue.all(), aliases));
    hooks.dispatch.tap('models-list', (ctx) => {
      const q = queryOf(ctx);
      const format = (q.get('format') || 'unified') as ListFormat;
      if (!(LIST_FORMATS as readonly string[]).includes(format)) throw gwError('INVALID_FORMAT', { format, allowed: LIST_FORMATS.join(', ') });
      const providerToken = q.get('provider') || 'all';
      const provider = providerToken === 'all' ? null : profiles.byType.get(providerToken)?.name;
      if (provider === undefined) throw gwError('INVALID_PROVIDER', { provider: providerToken, allowed: [...profiles.byType.keys()].sort().join(', ') });
      const capability = q.get('capability') || 'all';
      if (capability !== 'all' && !CAPABILITIES.has(capability)) throw gwError('INVALID_CAPABILITY', { capability });
      const down = noEndpointsError(env);
      if (down) throw down;
      const models = visible(ctx, listed.get()).filter(
        (m) => (!provider || m.family === provider) && (capability === 'all' || capabilities(m).includes(capability)),
      );
      return ctx.replyJson(200, renderList(format, models));
    });
  },
});
