// Per attempt: when routing chose the name (an alias's real name for that endpoint, a fallback
// model), send it — for a terminal step whose request does not ask for it itself. The built-in
// terminal steps do (SendPolicy.request is handed the model), so the built-in pipelines leave
// this step out; a pipeline that keeps it loses nothing (the body names the model already).
// Only the top-level `model` value changes; every other byte and the key order stay
// (Content-Length follows the new body). Nothing happens when the body is not JSON.
import { definePlugin, withModel } from '../engine/api.js';

export default definePlugin<Record<string, never>>({
  name: 'rewrite-model',
  uses: ['aliases'],
  schema: { type: 'object', additionalProperties: false },
  apply(hooks) {
    hooks.upstream.tap('rewrite-model', (ctx, up) => {
      up.body = withModel(up.body, ctx.attempt.model, ctx);
    });
  },
});
