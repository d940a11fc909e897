// The forwarder's decisions; its behaviour over real HTTP is in test/e2e/failover.test.ts.
import { describe, expect, it } from 'vitest';
import { connectionFailure } from '../../plugins/lib/relay.js';

describe('connection failure classification', () => {
  it.each([
    ['ECONNREFUSED', 'refused'], ['ECONNRESET', 'reset'], ['UND_ERR_SOCKET', 'closed'], ['UND_ERR_CONNECT_TIMEOUT', 'connect timeout'],
    ['EHOSTUNREACH', 'unreachable'], ['ENETUNREACH', 'unreachable'], ['ENOTFOUND', 'unreachable'],
  ])('%s is a connection failure (%s)', (code, kind) => {
    expect(connectionFailure(Object.assign(new Error(code), { code }))).toBe(kind);
  });
  it('reads the code of an aggregate error (dual-stack connect)', () => {
    expect(connectionFailure({ errors: [{ code: 'ECONNREFUSED' }, { code: 'ECONNREFUSED' }] })).toBe('refused');
  });
  it('does not retry timeouts after the request was sent, nor unknown errors', () => {
    expect(connectionFailure({ code: 'UND_ERR_HEADERS_TIMEOUT' })).toBeUndefined();
    expect(connectionFailure(new Error('boom'))).toBeUndefined();
  });
});
