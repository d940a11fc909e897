// The client address the rate limits count by. The connection's address, unless
// server.rate_limits.trust_proxy_headers is on and the connection comes from a trusted proxy
// (trusted_proxy_cidrs): then the right-most address of X-Forwarded-For that is not a trusted
// proxy — each proxy appends the address it saw, so everything left of the last untrusted hop may
// be the client's own invention. Ranges are compiled once, when the step is applied.
import { isIP } from 'node:net';
import { canonicalAddress, compileCidrs, type Context, type GatewayConfig } from '../../engine/api.js';

/** Hops read from the right of X-Forwarded-For at most: a chain of trusted proxies is short. */
const MAX_HOPS = 32;

/** `strict`: when a trusted proxy forwards no usable address (no X-Forwarded-For, or an entry
 *  that is not an address), the client is unknown ('') rather than the proxy itself — for the
 *  dashboard's gate, where the proxy's loopback address would let everyone in. The rate limits
 *  count such requests against the proxy. */
export function clientAddressOf(limits: GatewayConfig['server']['rate_limits'], strict = false): (ctx: Context) => string {
  const peer = (ctx: Context) => canonicalAddress(ctx.req.socket.remoteAddress ?? '');
  if (!limits.trust_proxy_headers) return peer;
  const trusted = compileCidrs(limits.trusted_proxy_cidrs);
  const isTrusted = (address: string) => {
    const v = isIP(address);
    return v !== 0 && trusted.check(address, v === 4 ? 'ipv4' : 'ipv6');
  };
  return (ctx) => {
    let hop = peer(ctx);
    if (!isTrusted(hop)) return hop;
    // Repeated headers arrive joined with ", " (node's rule for x-forwarded-for).
    const header = ctx.req.headers['x-forwarded-for'];
    const xff = Array.isArray(header) ? header.join(', ') : header;
    if (!xff) return strict ? '' : hop;
    let end = xff.length;
    for (let n = 0; n < MAX_HOPS && end > 0; n++) {
      const comma = xff.lastIndexOf(',', end - 1);
      const entry = hostOf(xff.slice(comma + 1, end).trim());
      // Not an address (a proxy's "unknown", garbage): trust stops at the hop that wrote it.
      if (!entry) return strict ? '' : hop;
      if (!isTrusted(entry)) return entry;
      hop = entry;
      end = comma;
    }
    return hop;
  };
}

/** An X-Forwarded-For entry as an address: "1.2.3.4", "1.2.3.4:5678", "2001:db8::1", "[2001:db8::1]:80". */
function hostOf(entry: string): string | undefined {
  if (isIP(entry)) return canonicalAddress(entry);
  const bracketed = /^\[([^\]]+)\](?::\d+)?$/.exec(entry);
  if (bracketed && isIP(bracketed[1]) === 6) return canonicalAddress(bracketed[1]);
  const v4port = /^(\d{1,3}(?:\.\d{1,3}){3}):\d+$/.exec(entry);
  if (v4port && isIP(v4port[1]) === 4) return v4port[1];
  return undefined;
}
