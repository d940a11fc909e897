// CORS headers on every response of the route, and the OPTIONS preflight answered here
// (never forwarded to a backend). The spec's headers are the floor: a preflight is also granted
// the headers and method it asks for, because browser clients send their own (the openai and
// anthropic packages add x-stainless-*, anthropic-version, x-api-key…) and the gateway performs
// no authentication of its own (the spec's Authentication item 1) that CORS would protect.
import { definePlugin } from '../engine/api.js';

interface Options {
  allow_origin: string;
  allow_methods: string;
  allow_headers: string;
  expose_headers: string;
  allow_requested: boolean;
}

/** A comma-separated list of header names (RFC 9110 tokens); anything else is not echoed. */
const HEADER_LIST = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+(?:[ \t]*,[ \t]*[!#$%&'*+.^_`|~0-9A-Za-z-]+)*$/;
const HEADER_LIST_MAX = 4096;
const METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE']);

export default definePlugin<Options>({
  name: 'cors',
  schema: {
    type: 'object',
    additionalProperties: false,
    properties: {
      allow_origin: { type: 'string', default: '*' },
      allow_methods: { type: 'string', default: 'GET, POST, OPTIONS' },
      allow_headers: { type: 'string', default: 'Content-Type, Authorization' },
      expose_headers: {
        type: 'string',
        default:
          'X-Gw-Request-Id, X-Gw-Endpoint, X-Gw-Model, X-Gw-Backend-Type, X-Gw-Response-Time, X-Gw-Routing-Strategy, X-Gw-Routing-Decision, X-Gw-Routing-Reason, X-Gw-Affinity, X-Gw-Mode, X-Gw-Token-Count, X-Gw-Attempts, Retry-After, X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Reset',
      },
      allow_requested: {
        type: 'boolean',
        default: true,
        description:
          'A preflight is also granted the headers (Access-Control-Request-Headers) and method (Access-Control-Request-Method) it asks for; false: only allow_headers and allow_methods',
      },
    },
  },
  apply(hooks, o) {
    const headers = [
      'access-control-allow-origin',
      o.allow_origin,
      'access-control-allow-methods',
      o.allow_methods,
      'access-control-allow-headers',
      o.allow_headers,
      'access-control-expose-headers',
      o.expose_headers,
    ];
    const preflightOnly = ['access-control-max-age', '600', 'vary', 'Access-Control-Request-Headers, Access-Control-Request-Method'];
    hooks.request.tap('cors', (ctx) => {
      if (ctx.req.method !== 'OPTIONS') {
        ctx.replyHeaders.push(...headers);
        return;
      }
      if (!o.allow_requested) {
        ctx.replyHeaders.push(...headers);
        return ctx.reply(204, null, preflightOnly);
      }
      const askedHeaders = ctx.header('access-control-request-headers');
      const askedMethod = ctx.header('access-control-request-method');
      ctx.replyHeaders.push(
        'access-control-allow-origin',
        o.allow_origin,
        'access-control-allow-methods',
        askedMethod && METHODS.has(askedMethod) && !o.allow_methods.includes(askedMethod) ? `${o.allow_methods}, ${askedMethod}` : o.allow_methods,
        'access-control-allow-headers',
        askedHeaders && askedHeaders.length <= HEADER_LIST_MAX && HEADER_LIST.test(askedHeaders) ? `${o.allow_headers}, ${askedHeaders}` : o.allow_headers,
        'access-control-expose-headers',
        o.expose_headers,
      );
      // A public page calling a gateway on a private address (Chrome's Private Network Access).
      if (ctx.header('access-control-request-private-network') === 'true') ctx.replyHeaders.push('access-control-allow-private-network', 'true');
      return ctx.reply(204, null, preflightOnly);
    });
  },
});
