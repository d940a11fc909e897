// GET /version: the running version and build data.
import { definePlugin } from '../engine/plugin.js';
import { replyJson } from './lib/reply.js';

export default definePlugin<Record<string, never>>({
  name: 'version',
  terminal: true,
  schema: { type: 'object', additionalProperties: false },
  apply(hooks, _o, env) {
    const build = { version: env.version, commit: process.env.GW_BUILD_COMMIT ?? 'unknown', date: process.env.GW_BUILD_DATE ?? 'unknown', go_version: `node ${process.version}` };
    const body = { version: env.version, build };
    hooks.dispatch.tap('version', (ctx) => replyJson(ctx, 200, body));
  },
});
