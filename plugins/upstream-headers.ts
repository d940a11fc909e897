// Headers toward the backend: the client's (less hop-by-hop ones, its Host, those the terminal
// step marks as another API's: UpstreamRequest.omitClientHeader, and while keys are on the
// gateway's key: Authorization and x-api-key), the gateway's request id and forwarding headers,
// then the endpoint's configured headers and auth, which win.
import { definePlugin } from '../engine/api.js';
import { KeyTable } from './access/key-table.js';

const DROP = new Set([
  'host',
  'connection',
  'keep-alive',
  'proxy-authenticate',
  'proxy-authorization',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'content-length',
  'x-gw-request-id',
  'x-gw-first-token-timeout',
  'x-forwarded-for',
  // The body is already read: the client's 100-continue handshake ended here.
  'expect',
]);

export default definePlugin<Record<string, never>>({
  name: 'upstream-headers',
  schema: { type: 'object', additionalProperties: false },
  apply(hooks, _o, env) {
    // While keys are on, the client's credential is the gateway's key: never a backend's to see.
    const drop = KeyTable.of(env.config.auth) ? new Set([...DROP, 'authorization', 'x-api-key']) : DROP;
    hooks.upstream.tap('upstream-headers', (ctx, up) => {
      const raw = ctx.req.rawHeaders;
      const ep = ctx.endpoint!;
      const forwardHost = ep.profile.request.forward_host_headers;
      const own = ep.headerNames;
      const out = up.headers;
      let xff = '';
      let contentType = false;
      // Names listed in the client's Connection header are hop-by-hop too.
      const conn = ctx.req.headers.connection;
      const connNames = conn && conn !== 'keep-alive' && conn !== 'close' ? conn.toLowerCase().split(/\s*,\s*/) : null;
      // Headers of the API the request was translated from (the terminal step's call).
      const omit = up.omitClientHeader;
      for (let i = 0; i < raw.length; i += 2) {
        const name = raw[i].toLowerCase();
        if (name === 'x-forwarded-for') xff = raw[i + 1];
        if (drop.has(name) || own.has(name) || connNames?.includes(name) || omit?.(name)) continue;
        if (name === 'content-type') contentType = true;
        out.push(name, raw[i + 1]);
      }
      const ip = ctx.clientIp();
      out.push('x-gw-request-id', ctx.id, 'x-forwarded-for', xff ? `${xff}, ${ip}` : ip);
      if (forwardHost) {
        out.push('x-forwarded-host', ctx.req.headers.host ?? '', 'x-forwarded-proto', 'encrypted' in ctx.req.socket ? 'https' : 'http');
      }
      if (!contentType && up.method === 'POST') out.push('content-type', 'application/json');
      for (let i = 0; i < ep.headers.length; i++) out.push(ep.headers[i]);
    });
  },
});
