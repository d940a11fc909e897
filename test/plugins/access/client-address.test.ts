// The client address the rate limits count by: X-Forwarded-For only from a trusted proxy, read
// from the right; IPv4, IPv6 and IPv4-mapped IPv6 peers and entries.
import { describe, expect, it } from 'vitest';
import type { Context } from '../../../engine/kernel/context.js';
import { loadConfig } from '../../../engine/core/config.js';
import { clientAddressOf } from '../../../plugins/access/client-address.js';

const limits = (o: Record<string, unknown>) => ({ ...loadConfig(null, {}).config.server.rate_limits, ...o });
const ctx = (peer: string, xff?: string | string[]) =>
  ({ req: { socket: { remoteAddress: peer }, headers: xff === undefined ? {} : { 'x-forwarded-for': xff } } }) as unknown as Context;

describe('clientAddressOf', () => {
  const trusting = clientAddressOf(limits({ trust_proxy_headers: true, trusted_proxy_cidrs: ['127.0.0.0/8', 'fd00::/8', '192.0.2.10'] }));

  it('believes a trusted peer, in any address form', () => {
    expect(trusting(ctx('127.0.0.1', '198.51.100.1'))).toBe('198.51.100.1');
    // A dual-stack listener reports IPv4 peers IPv4-mapped.
    expect(trusting(ctx('::ffff:127.0.0.1', '198.51.100.1'))).toBe('198.51.100.1');
    expect(trusting(ctx('fd12::5', '2001:db8::1'))).toBe('2001:db8::1');
    expect(trusting(ctx('192.0.2.10', '198.51.100.1'))).toBe('198.51.100.1');
  });

  it('takes the right-most untrusted entry; stops at an entry that is no address', () => {
    expect(trusting(ctx('127.0.0.1', '6.6.6.6, 198.51.100.1, 192.0.2.10, fd00::1'))).toBe('198.51.100.1');
    // Repeated headers count as one chain.
    expect(trusting(ctx('127.0.0.1', ['6.6.6.6', '198.51.100.1']))).toBe('198.51.100.1');
    expect(trusting(ctx('127.0.0.1', '198.51.100.1, unknown'))).toBe('127.0.0.1');
    expect(trusting(ctx('127.0.0.1', '::ffff:198.51.100.1'))).toBe('198.51.100.1');
    // Every hop trusted: the left-most.
    expect(trusting(ctx('127.0.0.1', '127.0.0.2, fd00::2'))).toBe('127.0.0.2');
    expect(trusting(ctx('127.0.0.1'))).toBe('127.0.0.1');
  });

  it('ignores the header from an untrusted peer, or with trust_proxy_headers off', () => {
    expect(trusting(ctx('203.0.113.9', '198.51.100.1'))).toBe('203.0.113.9');
    expect(trusting(ctx('::ffff:203.0.113.9', '198.51.100.1'))).toBe('203.0.113.9');
    expect(clientAddressOf(limits({}))(ctx('127.0.0.1', '198.51.100.1'))).toBe('127.0.0.1');
  });
});
