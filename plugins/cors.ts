// CORS headers on every response of the route, and the OPTIONS preflight answered here
// (never forwarded to a backend).
import { definePlugin } from '../engine/kernel/plugin.js';

interface Options { allow_origin: string; allow_methods: string; allow_headers: string; expose_headers: string }

export default definePlugin<Options>({
  name: 'cors',
  schema: {
    type: 'object', additionalProperties: false,
    properties: {
      allow_origin: { type: 'string', default: '*' },
      allow_methods: { type: 'string', default: 'GET, POST, OPTIONS' },
      allow_headers: { type: 'string', default: 'Content-Type, Authorization' },
      expose_headers: { type: 'string', default: 'X-Gw-Request-Id, X-Gw-Endpoint, X-Gw-Model, X-Gw-Backend-Type, X-Gw-Response-Time, X-Gw-Routing-Strategy, X-Gw-Routing-Decision, X-Gw-Routing-Reason, X-Gw-Mode' },
    },
  },
  apply(hooks, o) {
    const headers = [
      'access-control-allow-origin', o.allow_origin,
      'access-control-allow-methods', o.allow_methods,
      'access-control-allow-headers', o.allow_headers,
      'access-control-expose-headers', o.expose_headers,
    ];
    hooks.request.tap('cors', (ctx) => {
      ctx.replyHeaders.push(...headers);
      if (ctx.req.method !== 'OPTIONS') return;
      return ctx.reply(204, null, ['access-control-max-age', '600']);
    });
  },
});
