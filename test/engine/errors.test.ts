// Every error code is documented for users, and rendered in the spec's envelope.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ERROR_CODES, errorBody, gwError, type ErrorKey } from '../../engine/core/errors.js';

const readme = readFileSync('README.md', 'utf8');

describe('error codes', () => {
  it.each(Object.keys(ERROR_CODES))('%s is documented in README.md with its status', (key) => {
    const spec = ERROR_CODES[key as ErrorKey];
    const row = readme.split('\n').find((l) => l.startsWith(`| \`${key}\``));
    expect(row, `README.md needs a table row for ${key}`).toBeDefined();
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
