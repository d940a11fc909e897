// GET /version: the running version and build data.
import { definePlugin, PACKAGE_ROOT, sourceCommit } from '../engine/api.js';

/** The commit: the build's (GW_BUILD_COMMIT, the container sets it), else the git clone's it runs from. */
const COMMIT = process.env.GW_BUILD_COMMIT ?? sourceCommit(PACKAGE_ROOT) ?? 'unknown';

/** Build data; `go_version` (the spec's name) carries the Node.js version. */
export function buildInfo(version: string) {
  return { version, commit: COMMIT, date: process.env.GW_BUILD_DATE ?? 'unknown', go_version: process.version };
}

export default definePlugin<Record<string, never>>({
  name: 'version',
  terminal: true,
  schema: { type: 'object', additionalProperties: false },
  apply(hooks, _o, env) {
    const body = { version: env.version, build: buildInfo(env.version) };
    hooks.dispatch.tap('version', (ctx) => ctx.replyJson(200, body));
  },
});
