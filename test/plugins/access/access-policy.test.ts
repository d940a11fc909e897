// The dashboard's access policy as a function of the client address and the Host header: the
// addresses a test cannot connect from (a LAN client, IPv6, IPv4-mapped) are checked here.
import { describe, expect, it } from 'vitest';
import { compileAccessPolicy, hostName } from '../../../plugins/access/access-policy.js';

const loopbackOnly = compileAccessPolicy({ allowed_cidrs: ['127.0.0.0/8', '::1/128'], allowed_hosts: ['localhost', '127.0.0.1', '[::1]'] });

describe('dashboard access policy', () => {
  it('lets loopback in, by IPv4, IPv6 and IPv4-mapped IPv6, with a loopback Host and any port', () => {
    for (const [address, host] of [
      ['127.0.0.1', '127.0.0.1:8080'],
      ['127.9.9.9', 'localhost'],
      ['::1', '[::1]:8080'],
      ['::ffff:127.0.0.1', 'LocalHost:80'],
    ]) {
      expect(loopbackOnly.refusal(address, host), `${address} ${host}`).toBeUndefined();
    }
  });

  it('refuses a foreign address, naming allowed_cidrs', () => {
    for (const address of ['10.1.2.3', '192.168.1.20', '::2', 'fe80::1', '::ffff:10.0.0.1', '']) {
      expect(loopbackOnly.refusal(address, 'localhost'), address).toMatch(/is not in dashboard.access_policy.allowed_cidrs/);
    }
  });

  it('refuses a foreign or missing Host from a loopback address, naming allowed_hosts', () => {
    for (const host of ['evil.example', 'evil.example:8080', 'localhost.evil.example', '[::2]', undefined]) {
      expect(loopbackOnly.refusal('127.0.0.1', host), String(host)).toMatch(/is not in dashboard.access_policy.allowed_hosts/);
    }
  });

  it('widened to the private ranges, a LAN client passes; an empty allowed_hosts leaves the Host unchecked', () => {
    const lan = compileAccessPolicy({ allowed_cidrs: ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', '127.0.0.1'], allowed_hosts: [] });
    expect(lan.refusal('192.168.1.20', 'gateway.lan:8080')).toBeUndefined();
    expect(lan.refusal('172.31.255.255', undefined)).toBeUndefined();
    expect(lan.refusal('127.0.0.1', 'x')).toBeUndefined();
    expect(lan.refusal('172.32.0.1', 'x')).toMatch(/allowed_cidrs/);
    expect(lan.refusal('127.0.0.2', 'x')).toMatch(/allowed_cidrs/);
  });

  it('rejects an entry that is not a CIDR at load, naming it and the form to use', () => {
    for (const bad of ['10.0.0/8', '10.0.0.0/33', '::1/129', 'localhost', '10.0.0.0/8/1', '10.0.0.0/x']) {
      expect(() => compileAccessPolicy({ allowed_cidrs: [bad], allowed_hosts: [] }), bad).toThrow(
        `${JSON.stringify(bad)} is not a CIDR; write an address with a prefix length, e.g. 10.0.0.0/8`,
      );
    }
  });

  it('reads the host name from a Host header', () => {
    expect(hostName('Example.COM:443')).toBe('example.com');
    expect(hostName('[::1]:8080')).toBe('[::1]');
    expect(hostName('[::1]')).toBe('[::1]');
  });
});
