// Strip the mount prefix: /gw/<prefix>/<rest>?q → /<rest>?q (the query is kept; the endpoint's
// base path is added when the request is sent).
import { definePlugin } from '../engine/api.js';

interface Options {
  prefix?: string;
}

export default definePlugin<Options>({
  name: 'match-prefix',
  provides: ['path'],
  schema: {
    type: 'object',
    additionalProperties: false,
    properties: { prefix: { type: 'string', pattern: '^/', description: 'The prefix to strip on path mounts (per-profile mounts know theirs)' } },
  },
  apply(hooks, o) {
    hooks.request.tap('match-prefix', (ctx) => {
      const url = ctx.req.url ?? '/';
      const prefix = ctx.route.prefix ?? o.prefix ?? '';
      // The router may have matched a percent-encoded spelling of the prefix: cut at the next slash then.
      let cut = url.startsWith(prefix) ? prefix.length : url.indexOf('/', '/gw/'.length);
      if (cut < 0) cut = url.length;
      let rest = url.slice(cut);
      if (rest === '' || rest[0] === '?') rest = `/${rest}`;
      ctx.path = rest;
      const q = rest.indexOf('?');
      ctx.pathname = q < 0 ? rest : rest.slice(0, q);
    });
  },
});
