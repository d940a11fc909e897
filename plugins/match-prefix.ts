// Strip the mount prefix: /gw/<prefix>/<rest>?q → /<rest>?q (the query is kept; the endpoint's
// base path is added when the request is sent).
import { definePlugin } from '../engine/plugin.js';

export default definePlugin<Record<string, never>>({
  name: 'match-prefix',
  schema: { type: 'object', additionalProperties: false },
  apply(hooks) {
    hooks.request.tap('match-prefix', (ctx) => {
      const url = ctx.req.url ?? '/';
      const prefix = ctx.route.prefix ?? '';
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
