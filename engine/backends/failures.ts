// How an upstream attempt can fail, told apart once for the interceptors (breaker, health) and
// the attempt loop's failover decision.

/** `instanceof` that also knows instances made by another copy of this module (a plugin that
 *  imports the package from its own node_modules runs one). */
function branded<T extends abstract new (...args: never[]) => Error>(cls: T, name: string): T {
  const brand = Symbol.for(`inference-gateway/${name}`);
  Object.defineProperty(cls.prototype, brand, { value: true });
  Object.defineProperty(cls, Symbol.hasInstance, {
    value: (v: unknown) => typeof v === 'object' && v !== null && (v as Record<symbol, unknown>)[brand] === true,
  });
  return cls;
}

/** The client closed its connection: the upstream request is cancelled; no one's failure. */
export class ClientGone extends Error {
  constructor() {
    super('client closed the connection');
  }
}
branded(ClientGone, 'client-gone');

/** A step of ours threw while the reply head was being written: a gateway bug (a 500), not a
 *  failure of the endpoint. */
export class StepFailed extends Error {
  constructor(readonly failure: unknown) {
    super('a step failed while writing the reply head');
  }
}
branded(StepFailed, 'step-failed');

/** The endpoint's circuit breaker is open: it was skipped, nothing was sent. */
export class BreakerOpen extends Error {
  readonly code = 'GW_BREAKER_OPEN';
  constructor(endpoint: string) {
    super(`the circuit breaker of ${endpoint} is open`);
  }
}
branded(BreakerOpen, 'breaker-open');

/**
 * What a connection-level failure was, in words. Whether the request had gone out is told by
 * whether undici started it (a timeout can hit a connected socket too), not by the code:
 * - refused, connect timeout, unreachable: typically before the request went out;
 * - reset, closed: the connection died without a reply;
 * - timeout: no reply head within the endpoint's response timeout.
 */
export type ConnectionFailure = 'refused' | 'connect timeout' | 'unreachable' | 'reset' | 'closed' | 'timeout';

const CONNECTION_CODES = new Map<string, ConnectionFailure>([
  ['ECONNREFUSED', 'refused'],
  ['ECONNRESET', 'reset'],
  ['EPIPE', 'reset'],
  ['UND_ERR_SOCKET', 'closed'],
  ['UND_ERR_CONNECT_TIMEOUT', 'connect timeout'],
  ['ETIMEDOUT', 'connect timeout'],
  ['EHOSTUNREACH', 'unreachable'],
  ['ENETUNREACH', 'unreachable'],
  ['EHOSTDOWN', 'unreachable'],
  ['ENOTFOUND', 'unreachable'],
  ['EAI_AGAIN', 'unreachable'],
  ['EADDRNOTAVAIL', 'unreachable'],
  ['UND_ERR_HEADERS_TIMEOUT', 'timeout'],
]);

export function errorCode(err: unknown): string | undefined {
  const e = err as { code?: string; errors?: { code?: string }[]; cause?: { code?: string } };
  return e?.code ?? e?.errors?.[0]?.code ?? e?.cause?.code;
}

/** A connection-level failure (the request may go to another endpoint), or undefined. */
export function connectionFailure(err: unknown): ConnectionFailure | undefined {
  const code = errorCode(err);
  return code ? CONNECTION_CODES.get(code) : undefined;
}

/** undici refused to send the request as it is (a header it cannot forward, say): the client's
 *  request is the problem, not the endpoint. */
export function unsendable(err: unknown): boolean {
  const code = errorCode(err);
  return code === 'UND_ERR_INVALID_ARG' || code === 'UND_ERR_NOT_SUPPORTED' || code === 'UND_ERR_REQ_CONTENT_LENGTH_MISMATCH';
}

/** Nothing the endpoint did: the client left, a step of ours threw, or the request could not be sent. */
export function notTheEndpoints(err: unknown): boolean {
  return err instanceof ClientGone || err instanceof StepFailed || err instanceof BreakerOpen || unsendable(err);
}
