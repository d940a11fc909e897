// The models a key may use (auth.keys[].models): a request naming another — as the client named
// it, a model or an alias — is refused with 403 MODEL_NOT_ALLOWED before any backend is asked; a
// family's model-management routes (pull, create, delete…: the profile's management_paths) take
// only an admin key.
// The names an alias or a fallback chain stands for are the operator's configuration, allowed with
// it. A shared step after every pipeline's own (pipelines/shared.yaml), so that a pipeline of
// one's own cannot leave it out; model lists filter themselves (plugins/access/visible.ts). While
// keys are off, nothing is tapped.
import { definePlugin, gwError } from '../engine/api.js';
import { KeyTable } from './access/key-table.js';

export default definePlugin<Record<string, never>>({
  name: 'model-scope',
  uses: ['body', 'aliases'],
  schema: { type: 'object', additionalProperties: false },
  apply(hooks, _o, env) {
    const table = KeyTable.of(env.config.auth);
    // Pulling, creating and deleting models on the engines is an operator's act: admin keys only.
    const management = new Set(env.profile?.request.management_paths);
    // Nothing to check on this route: every key may use every model, and it manages none.
    if (!table || (management.size === 0 && table.keys.every((k) => k.everyModel))) return;
    hooks.request.tap('model-scope', (ctx) => {
      const caller = ctx.caller;
      if (caller === null) return;
      if (management.size > 0 && management.has(ctx.pathname) && !caller.admin) throw gwError('ADMIN_KEY_REQUIRED');
      if (caller.everyModel) return;
      const model = ctx.requested?.requested ?? ctx.model;
      if (model !== undefined && !caller.allows(model)) throw gwError('MODEL_NOT_ALLOWED', { model });
    });
  },
});
