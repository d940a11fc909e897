// The dashboard's access policy (dashboard.access_policy): client addresses by CIDR (a node
// BlockList built once at load, engine/core/cidr.ts) and the Host header by name. A request
// passes when both match.
import { BlockList, isIP } from 'node:net';
import { canonicalAddress, parseCidr } from '../../engine/api.js';

export interface AccessPolicyConfig {
  allowed_cidrs: readonly string[];
  allowed_hosts: readonly string[];
}

export interface AccessPolicy {
  /** Why the request is refused, or undefined when it may pass. */
  refusal(address: string, host: string | undefined): string | undefined;
}

/** The Host header's name: lower-case, the port dropped ("[::1]:8080" → "[::1]"). */
export function hostName(host: string): string {
  const h = host.trim().toLowerCase();
  if (h.startsWith('[')) {
    const end = h.indexOf(']');
    return end < 0 ? h : h.slice(0, end + 1);
  }
  const colon = h.indexOf(':');
  return colon < 0 ? h : h.slice(0, colon);
}

/** Compile the policy; throws with the bad entry and the fix when a CIDR does not parse. */
export function compileAccessPolicy(config: AccessPolicyConfig): AccessPolicy {
  const cidrs = new BlockList();
  for (const entry of config.allowed_cidrs) {
    const cidr = parseCidr(entry);
    if (typeof cidr === 'string') {
      throw new Error(
        `dashboard.access_policy.allowed_cidrs: ${JSON.stringify(entry)} is not a CIDR; write an address with a prefix length, e.g. 10.0.0.0/8 or fd00::/8 (${cidr})`,
      );
    }
    cidrs.addSubnet(cidr.address, cidr.prefix, cidr.family);
  }
  // An empty list leaves the Host header unchecked (the CIDRs alone decide).
  const hosts = config.allowed_hosts.length ? new Set(config.allowed_hosts.map(hostName)) : null;
  return {
    refusal(rawAddress, host) {
      const address = canonicalAddress(rawAddress);
      const family = isIP(address);
      if (!family || !cidrs.check(address, family === 6 ? 'ipv6' : 'ipv4')) {
        return `client address ${address || '(unknown)'} is not in dashboard.access_policy.allowed_cidrs`;
      }
      if (hosts && (host === undefined || !hosts.has(hostName(host)))) {
        return `Host ${JSON.stringify(host ?? '')} is not in dashboard.access_policy.allowed_hosts`;
      }
      return undefined;
    },
  };
}
