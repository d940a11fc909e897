// The forwarder's decisions; its behaviour over real HTTP is in test/e2e/resilience/failover.test.ts.
import { describe, expect, it } from 'vitest';
import { connectionFailure } from '../../engine/backends/failures.js';

describe('connection failure classification', () => {
  it.each([
    ['ECONNREFUSED', 'refused'],
    ['ECONNRESET', 'reset'],
    ['UND_ERR_SOCKET', 'closed'],
    ['UND_ERR_CONNECT_TIMEOUT', 'connect timeout'],
    ['EHOSTUNREACH', 'unreachable'],
    ['ENETUNREACH', 'unreachable'],
    ['ENOTFOUND', 'unreachable'],
    ['UND_ERR_HEADERS_TIMEOUT', 'timeout'],
  ])('%s is a connection failure (%s)', (code, kind) => {
    expect(connectionFailure(Object.assign(new Error(code), { code }))).toBe(kind);
  });
  it('reads the code of an aggregate error (dual-stack connect)', () => {
    expect(connectionFailure({ errors: [{ code: 'ECONNREFUSED' }, { code: 'ECONNREFUSED' }] })).toBe('refused');
  });
  it('knows no other errors (a malformed reply, say), nor names that are not codes', () => {
    expect(connectionFailure(new Error('boom'))).toBeUndefined();
    expect(connectionFailure({ code: 'UND_ERR_BODY_TIMEOUT' })).toBeUndefined();
    expect(connectionFailure({ code: 'constructor' })).toBeUndefined();
    expect(connectionFailure({ code: '__proto__' })).toBeUndefined();
  });
});
