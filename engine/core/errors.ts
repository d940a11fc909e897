// The one table of gateway error codes and the one renderer of the spec's envelope
// {error:{message,type,code}}, or of the route's own API shape (errorBody). Every code here is
// documented in docs/reference/errors.md (a test checks).
import type { ServerResponse } from 'node:http';
import { clip } from './head.js';

type Detail = Record<string, unknown>;

/** Whom a routing refusal is for: the route's family (the spec: "the message names the provider");
 *  on a route over every family (/gw/openai/, /gw/msgapi/, /gw/proxy/: no provider) the model the
 *  request names, else the route. */
const forWhom = (d: Detail): string => (d.provider ? `provider ${d.provider}` : d.model ? `model ${clip(d.model)}` : 'this route');
interface ErrorSpec {
  status: number;
  type: string;
  /** The envelope's `code`; the table key when absent. */
  code?: string | number;
  message: (d: Detail) => string;
}

export const ERROR_CODES = {
  METRICS_DISABLED: {
    status: 503,
    type: 'service_unavailable',
    message: () => "metrics are turned off in this gateway's configuration; set metrics.enabled: true to serve /internal/metrics",
  },
  METRICS_INCOMPLETE: {
    status: 503,
    type: 'service_unavailable',
    message: () =>
      'not every worker answered for its series in time (one starting, stopping or stalled); scrape again: a partial answer would read as counters going back',
  },
  API_KEY_REQUIRED: {
    status: 401,
    type: 'invalid_request_error',
    code: 'invalid_api_key',
    message: () => 'an API key is required: send it as Authorization: Bearer KEY or as x-api-key: KEY',
  },
  API_KEY_INVALID: { status: 401, type: 'invalid_request_error', code: 'invalid_api_key', message: () => 'the API key is not valid' },
  API_KEY_DISABLED: { status: 401, type: 'invalid_request_error', code: 'invalid_api_key', message: () => 'the API key is disabled' },
  API_KEY_EXPIRED: { status: 401, type: 'invalid_request_error', code: 'invalid_api_key', message: (d) => `the API key expired at ${d.at}` },
  ADMIN_KEY_REQUIRED: {
    status: 403,
    type: 'permission_denied',
    code: 'admin_key_required',
    message: () => 'this route needs an admin key (auth.admin)',
  },
  MODEL_NOT_ALLOWED: {
    status: 403,
    type: 'permission_denied',
    code: 'model_not_allowed',
    message: (d) => `this API key may not use model ${clip(d.model)}`,
  },
  KEY_RATE_LIMITED: {
    status: 429,
    type: 'rate_limited',
    message: (d) => `rate limit exceeded for this API key (${d.limit} requests a minute, burst ${d.burst}); retry after ${d.retryAfter}s`,
  },
  KEY_TOKEN_LIMITED: {
    status: 429,
    type: 'rate_limited',
    code: 'token_limit_exceeded',
    message: (d) =>
      d.limit === 'max_concurrent'
        ? `this API key has ${d.value} requests under way, its max_concurrent; retry when one has finished`
        : `token limit reached for this API key: ${d.limit} ${d.value} of ${clip(d.of)}, ${d.remaining} left; retry after ${d.retryAfter}s`,
  },
  ROUTE_NOT_FOUND: { status: 404, type: 'not_found', message: (d) => `no route for ${clip(d.method)} ${clip(d.path)}` },
  UNSAFE_PATH: {
    status: 400,
    type: 'bad_request',
    message: (d) => `path ${clip(d.path)} has ${d.reason}; the gateway forwards only normalised paths — send the path without it`,
  },
  ROUTE_NOT_SERVED: {
    status: 404,
    type: 'not_found',
    message: (d) => `model ${clip(d.model)} is served by ${d.families} endpoints, whose engines have no ${clip(d.path)}; ${d.hint}`,
  },
  PATH_NOT_ALLOWED: {
    status: 404,
    type: 'not_found',
    message: (d) => `path ${clip(d.path)} is not in the ${d.provider} allowlist (profile api.paths); the backend was not contacted`,
  },
  PATH_NOT_SUPPORTED: {
    status: 501,
    type: 'not_implemented',
    message: (d) => `path ${clip(d.path)} of ${d.provider} is not supported through the gateway; the backend was not contacted`,
  },
  METHOD_NOT_ALLOWED: {
    status: 405,
    type: 'method_not_allowed',
    message: (d) =>
      `${clip(d.method)} ${clip(d.path)} is answered by the gateway from its model catalogue, which takes ${d.allowed} only; the backend was not contacted`,
  },
  ENDPOINT_UNAVAILABLE: {
    status: 503,
    type: 'endpoint_unavailable',
    code: 503,
    message: (d) => `no healthy endpoint for ${forWhom(d)}${d.reason ? ` (${d.reason})` : ''}${d.hint ? `; ${d.hint}` : ''}`,
  },
  CIRCUIT_BREAKER: {
    status: 503,
    type: 'circuit_breaker',
    code: 503,
    message: (d) =>
      `every endpoint for ${forWhom(d)} has an open circuit breaker (${d.skipped} skipped); the next test request goes through in ${d.retryAfter ?? 1}s (Retry-After)`,
  },
  MODEL_NOT_FOUND: {
    status: 404,
    type: 'not_found',
    message: (d) => `model ${clip(d.model)} is not served by ${d.provider ? `any ${d.provider} endpoint` : 'any endpoint'}${d.hint ? `; ${d.hint}` : ''}`,
  },
  MODEL_UNAVAILABLE: {
    status: 503,
    type: 'model_unavailable',
    message: (d) =>
      `model ${clip(d.model)} is served only by ${d.provider ? `${d.provider} endpoints` : 'endpoints'} that are not routable now (${d.endpoints})${d.hint ? `; ${d.hint}` : ''}`,
  },
  NO_ENDPOINTS: {
    status: 503,
    type: 'service_unavailable',
    message: (d) =>
      `no healthy endpoints: the model catalogue is empty until one recovers${d.endpoints ? ` (${d.endpoints})` : ''}${d.hint ? `; ${d.hint}` : ''}`,
  },
  INVALID_FORMAT: {
    status: 400,
    type: 'bad_request',
    message: (d) => `format "${clip(d.format)}" is not supported; use one of: ${d.allowed}`,
  },
  INVALID_PROVIDER: {
    status: 400,
    type: 'bad_request',
    message: (d) => `provider "${clip(d.provider)}" is not a backend family; use one of: ${d.allowed}`,
  },
  INVALID_CAPABILITY: {
    status: 400,
    type: 'bad_request',
    message: (d) => `capability "${clip(d.capability)}" is not known; use one of: chat, completion, embedding, vision`,
  },
  BODY_TOO_LARGE: {
    status: 413,
    type: 'request_too_large',
    message: (d) => `request body is larger than the ${d.limit}-byte limit`,
  },
  BODY_TIMEOUT: {
    status: 408,
    type: 'request_timeout',
    message: (d) => `no byte of the request body arrived for ${d.timeout} (server.body_idle_timeout); the connection is closed`,
  },
  INVALID_JSON: { status: 400, type: 'bad_request', message: (d) => `request body is not valid JSON: ${d.reason}` },
  BAD_REQUEST: { status: 400, type: 'bad_request', message: (d) => String(d.reason) },
  QUEUE_FULL: {
    status: 429,
    type: 'queue_full',
    message: (d) => `every endpoint for ${forWhom(d)} is at its concurrency limit with a full queue (${d.endpoints}); retry after ${d.retryAfter}s`,
  },
  RATE_LIMITED: {
    status: 429,
    type: 'rate_limited',
    message: (d) => `rate limit exceeded: ${d.what} (${d.limit} requests a minute, burst ${d.burst}); retry after ${d.retryAfter}s`,
  },
  ENDPOINT_RATE_LIMITED: {
    status: 429,
    type: 'rate_limited',
    message: (d) => `every endpoint for ${forWhom(d)} is at its requests-per-minute limit (${d.endpoints}); retry after ${d.retryAfter}s`,
  },
  // Backpressure, not absence: the endpoint is up and busy, and the client may retry here (429);
  // 503 says nothing can serve (the distinction llm-d draws too).
  QUEUE_TIMEOUT: {
    status: 429,
    type: 'queue_timeout',
    message: (d) =>
      `waited ${d.timeout} for a free slot on endpoint ${d.endpoint} (max_concurrent_requests ${d.limit}, queue_timeout); retry after ${d.retryAfter}s`,
  },
  UPSTREAM_TIMEOUT: {
    status: 504,
    type: 'gateway_timeout',
    message: (d) => `endpoint ${d.endpoint} sent no reply head within ${d.timeout}${d.detail ? `; ${d.detail}` : ''}`,
  },
  BUDGET_EXCEEDED: {
    status: 504,
    type: 'gateway_timeout',
    message: (d) =>
      `no reply within the request's budget of ${d.budget} (proxy.retry.budget) after ${d.attempts} attempt${d.attempts === 1 ? '' : 's'}; raise proxy.retry.budget or check the endpoints in /internal/status/endpoints`,
  },
  UPSTREAM_ERROR: { status: 502, type: 'bad_gateway', message: (d) => `endpoint ${d.endpoint} failed: ${d.reason}` },
  UPSTREAM_STREAM_BROKEN: {
    status: 502,
    type: 'bad_gateway',
    message: (d) => `endpoint ${d.endpoint} ${d.reason} after the reply had started; the reply is incomplete`,
  },
  DASHBOARD_DISABLED: {
    status: 503,
    type: 'service_unavailable',
    message: () =>
      'the dashboard is turned off in this configuration (dashboard.enabled: false); set dashboard.enabled: true to serve /internal/ui/ (the status routes under /internal/status stay available either way)',
  },
  DASHBOARD_FORBIDDEN: {
    status: 403,
    type: 'forbidden',
    message: (d) =>
      `the dashboard refuses this request: ${d.reason}; widen dashboard.access_policy in the config to let it in (the status routes under /internal/status are not gated)`,
  },
  INTERNAL_ERROR: { status: 500, type: 'internal_error', message: () => 'internal gateway error; see the gateway log' },
} satisfies Record<string, ErrorSpec>;

export type ErrorKey = keyof typeof ERROR_CODES;

/** Marks gateway errors across copies of this module (a plugin importing the package from its
 *  own node_modules gets another copy: `instanceof` would not see its errors). */
const BRAND = Symbol.for('inference-gateway/error');

/** An error the gateway answers with: rendered as the spec's envelope by the one renderer. */
export class GatewayError extends Error {
  static override [Symbol.hasInstance](value: unknown): boolean {
    return typeof value === 'object' && value !== null && (value as Record<symbol, unknown>)[BRAND] === true;
  }

  constructor(
    /** The table key (ERROR_CODES), or a plugin's own code. */
    readonly key: string,
    readonly status: number,
    readonly type: string,
    readonly code: string | number,
    message: string,
    readonly detail: Detail = {},
    /** Extra reply headers, flat (Retry-After, say). */
    readonly headers: readonly string[] = [],
  ) {
    super(message);
  }
}
Object.defineProperty(GatewayError.prototype, BRAND, { value: true });

export function gwError(key: ErrorKey, detail: Detail = {}, headers: readonly string[] = []): GatewayError {
  const spec: ErrorSpec = ERROR_CODES[key];
  return new GatewayError(key, spec.status, spec.type, spec.code ?? key, spec.message(detail), detail, headers);
}

const TYPE_OF_STATUS: Record<number, string> = {
  400: 'bad_request',
  401: 'unauthorized',
  402: 'payment_required',
  403: 'forbidden',
  404: 'not_found',
  405: 'method_not_allowed',
  408: 'request_timeout',
  409: 'conflict',
  413: 'request_too_large',
  415: 'unsupported_media_type',
  422: 'unprocessable_entity',
  429: 'rate_limited',
  500: 'internal_error',
  501: 'not_implemented',
  502: 'bad_gateway',
  503: 'service_unavailable',
  504: 'gateway_timeout',
};

/**
 * For plugins: refuse the request with any status (400–599), code and message, answered in the
 * route's envelope like every gateway error (CORS and X-Gw-* included). Throw what it returns:
 *   throw refuse(401, 'API_KEY_REQUIRED', 'send your key in the X-Api-Key header');
 */
export function refuse(status: number, code: string, message: string, type?: string): GatewayError {
  if (!Number.isInteger(status) || status < 400 || status > 599) throw new RangeError(`refuse(): status ${status} is not an error status (400-599)`);
  return new GatewayError(code, status, type ?? TYPE_OF_STATUS[status] ?? (status < 500 ? 'bad_request' : 'server_error'), code, message);
}

// The messages API's error types by status (other 4xx: invalid_request_error; other 5xx: api_error).
const MSGAPI_ERROR_TYPES: Record<number, string> = {
  400: 'invalid_request_error',
  401: 'authentication_error',
  403: 'permission_error',
  404: 'not_found_error',
  413: 'request_too_large',
  429: 'rate_limit_error',
  500: 'api_error',
  529: 'overloaded_error',
};
export const msgapiErrorType = (status: number): string => MSGAPI_ERROR_TYPES[status] ?? (status >= 500 ? 'api_error' : 'invalid_request_error');

/** The shapes a gateway error can take: the spec's envelope (`gateway`), the messages API's, and
 *  the native shapes of engines whose clients read their own (profile api.error_formats). */
export type ErrorFormat = 'gateway' | 'msgapi' | 'localrunner' | 'cppengine';

// The C++ engine's error types by status, as its server words them (other 4xx: invalid_request_error;
// other 5xx: server_error).
const CPPENGINE_ERROR_TYPES: Record<number, string> = {
  400: 'invalid_request_error',
  401: 'authentication_error',
  403: 'permission_error',
  404: 'not_found_error',
  500: 'server_error',
  501: 'not_supported_error',
  503: 'unavailable_error',
};
const cppengineErrorType = (status: number): string => CPPENGINE_ERROR_TYPES[status] ?? (status >= 500 ? 'server_error' : 'invalid_request_error');

/** The error body in the route's shape. `gateway`: the spec's envelope {error:{message,type,code}}.
 *  `msgapi`: {type: "error", error: {type, message}} with the API's type for the status, plus our
 *  `code`. `localrunner` (Ollama's native routes): {error: "<message>"}, the string its clients
 *  show. `cppengine` (llama.cpp's native routes): {error: {code: <status>, message, type}} with the
 *  server's own type for the status. */
export function errorBody(err: GatewayError, format: ErrorFormat = 'gateway'): string {
  switch (format) {
    case 'msgapi':
      return JSON.stringify({ type: 'error', error: { type: msgapiErrorType(err.status), message: err.message, code: err.code } });
    case 'localrunner':
      return JSON.stringify({ error: err.message });
    case 'cppengine':
      return JSON.stringify({ error: { code: err.status, message: err.message, type: cppengineErrorType(err.status) } });
    default:
      return JSON.stringify({ error: { message: err.message, type: err.type, code: err.code } });
  }
}

/** Write the error in the route's shape. On a routed request the head goes through the kernel's
 *  writer, which adds the route's headers (CORS, X-Gw-*); `raw` skips them (the respond hook itself failed). */
export function renderError(res: ServerResponse, err: GatewayError, format: ErrorFormat = 'gateway', raw = false): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const body = errorBody(err, format);
  const headers = ['content-type', 'application/json; charset=utf-8', 'content-length', String(Buffer.byteLength(body)), ...(err.headers ?? [])];
  const head = (res as { rawWriteHead?: (status: number, headers: string[]) => unknown }).rawWriteHead;
  if (raw && typeof head === 'function') head.call(res, err.status, headers);
  else res.writeHead(err.status, headers);
  res.end(body);
}

/** A configuration problem: names the file, the field (JSON pointer or dotted path) and the fix. */
export class ConfigError extends Error {
  constructor(
    readonly file: string,
    readonly field: string,
    readonly problem: string,
    readonly fix = '',
  ) {
    super(`${file}${field ? ` (${field})` : ''}: ${problem}${fix ? `\n  fix: ${fix}` : ''}`);
  }
}
