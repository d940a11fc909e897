// Every error code is documented for users, and rendered in the spec's envelope.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ERROR_CODES, errorBody, gwError, type ErrorKey } from '../../../engine/core/errors.js';

const readme = readFileSync('docs/reference/errors.md', 'utf8');

describe('error codes', () => {
  it.each(Object.keys(ERROR_CODES))('%s is documented in docs/reference/errors.md with its status', (key) => {
    const spec = ERROR_CODES[key as ErrorKey];
    const row = readme.split('\n').find((l) => l.startsWith(`| \`${key}\``));
    expect(row, `docs/reference/errors.md needs a table row for ${key}`).toBeDefined();
    expect(row).toContain(String(spec.status));
    expect(row).toContain(spec.type);
  });

  it('renders the envelope {error:{message,type,code}}', () => {
    expect(JSON.parse(errorBody(gwError('ENDPOINT_UNAVAILABLE', { provider: 'pagedengine' })))).toEqual({
      error: { message: 'no healthy endpoint for provider pagedengine', type: 'endpoint_unavailable', code: 503 },
    });
    expect(JSON.parse(errorBody(gwError('BODY_TOO_LARGE', { limit: 10 }))).error.code).toBe('BODY_TOO_LARGE');
  });
});

describe("error shapes of the routes' own APIs", () => {
  const notFound = gwError('MODEL_NOT_FOUND', { model: 'm', provider: 'localrunner' });
  const limited = gwError('RATE_LIMITED', { what: 'per address', limit: 6, burst: 1, retryAfter: 10 });

  it('localrunner: the text alone, {"error": "<message>"}', () => {
    expect(JSON.parse(errorBody(notFound, 'localrunner'))).toEqual({ error: 'model m is not served by any localrunner endpoint' });
  });

  it('cppengine: {"error": {"code": <status>, "message", "type"}} with the server\'s type for the status', () => {
    expect(JSON.parse(errorBody(notFound, 'cppengine'))).toEqual({
      error: { code: 404, message: 'model m is not served by any localrunner endpoint', type: 'not_found_error' },
    });
    expect(JSON.parse(errorBody(gwError('ENDPOINT_UNAVAILABLE', { provider: 'cppengine' }), 'cppengine')).error.type).toBe('unavailable_error');
    expect(JSON.parse(errorBody(gwError('PATH_NOT_SUPPORTED', { path: '/x', provider: 'cppengine' }), 'cppengine')).error.type).toBe('not_supported_error');
    // Statuses the server never sends: its general types.
    expect(JSON.parse(errorBody(limited, 'cppengine')).error).toMatchObject({ code: 429, type: 'invalid_request_error' });
    expect(JSON.parse(errorBody(gwError('UPSTREAM_TIMEOUT', { endpoint: 'e', timeout: '5m' }), 'cppengine')).error).toMatchObject({
      code: 504,
      type: 'server_error',
    });
  });

  it('msgapi: {type: "error", error: {type, message, code}}', () => {
    expect(JSON.parse(errorBody(limited, 'msgapi'))).toEqual({
      type: 'error',
      error: { type: 'rate_limit_error', message: limited.message, code: 'RATE_LIMITED' },
    });
  });
});
