// Per attempt: when routing chose the name (an alias's real name for that endpoint, a fallback
// model), send it. Only the
// top-level `model` value changes; every other byte and the key order stay (Content-Length
// follows the new body). Nothing happens when the name already matches or the body is not JSON.
import { definePlugin, findModelField, replaceModel } from '../engine/api.js';

export default definePlugin<Record<string, never>>({
  name: 'rewrite-model',
  uses: ['aliases'],
  schema: { type: 'object', additionalProperties: false },
  apply(hooks) {
    hooks.upstream.tap('rewrite-model', (ctx, up) => {
      const real = ctx.attempt.model;
      if (!real || !up.body) return;
      // The original body (span already found), or one a translator built.
      const field = up.body === ctx.body ? ctx.modelSpan() : findModelField(up.body);
      if (!field || field.value === real) return;
      up.body = replaceModel(up.body, field, real);
    });
  },
});
