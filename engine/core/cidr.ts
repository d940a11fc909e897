// Address ranges from the config (server.rate_limits.trusted_proxy_cidrs): parsed and checked at
// load, compiled once into node's BlockList, which matches IPv4, IPv6 and IPv4-mapped IPv6.
import { BlockList, isIP } from 'node:net';

export interface Cidr {
  address: string;
  prefix: number;
  family: 'ipv4' | 'ipv6';
}

/** "10.0.0.0/8", "fd00::/8", or one address (a /32 or /128); a string saying what is wrong otherwise. */
export function parseCidr(text: string): Cidr | string {
  const slash = text.indexOf('/');
  const address = (slash < 0 ? text : text.slice(0, slash)).trim();
  const version = isIP(address);
  if (version === 0) return `"${address}" is not an IPv4 or IPv6 address`;
  const max = version === 4 ? 32 : 128;
  const bits = slash < 0 ? String(max) : text.slice(slash + 1).trim();
  if (!/^\d{1,3}$/.test(bits) || +bits > max) return `the prefix length "${bits}" must be a whole number from 0 to ${max}`;
  return { address, prefix: +bits, family: version === 4 ? 'ipv4' : 'ipv6' };
}

/** Compile checked ranges (config load refuses bad ones) into a matcher. */
export function compileCidrs(list: readonly string[]): BlockList {
  const set = new BlockList();
  for (const text of list) {
    const c = parseCidr(text);
    if (typeof c !== 'string') set.addSubnet(c.address, c.prefix, c.family);
  }
  return set;
}

/** The address as one key whatever the socket's form: IPv4-mapped IPv6 (::ffff:10.0.0.1, what a
 *  dual-stack listener reports) becomes plain IPv4. */
export function canonicalAddress(address: string): string {
  return address.startsWith('::ffff:') && isIP(address.slice(7)) === 4 ? address.slice(7) : address;
}
