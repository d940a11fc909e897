import { describe, expect, it } from 'vitest';
import { compilePattern, matchPattern, PathSet } from '../../../engine/core/path-patterns.js';

describe('path patterns', () => {
  it('{name} is exactly one non-empty segment', () => {
    const p = compilePattern('/api/blobs/{digest}');
    expect(matchPattern(p, '/api/blobs/sha256:29fdb92e57cf')).toEqual({ digest: 'sha256:29fdb92e57cf' });
    expect(matchPattern(p, '/api/blobs/a/b')).toBeUndefined();
    expect(matchPattern(p, '/api/blobs/')).toBeUndefined();
    expect(matchPattern(p, '/api/blobs')).toBeUndefined();
  });

  it('{name...} is the rest of the path: one or more segments, none empty, no trailing slash', () => {
    const p = compilePattern('/v1/models/{model...}');
    expect(matchPattern(p, '/v1/models/llama3.1:8b')).toEqual({ model: 'llama3.1:8b' });
    expect(matchPattern(p, '/v1/models/Qwen/Qwen2.5-7B-Instruct')).toEqual({ model: 'Qwen/Qwen2.5-7B-Instruct' });
    for (const no of ['/v1/models/', '/v1/models', '/v1/models//x', '/v1/models/x/', '/v1/modelsx/y']) expect(matchPattern(p, no), no).toBeUndefined();
  });

  it('a segment in the middle and literal dots are matched as written', () => {
    const p = compilePattern('/v1/responses/{id}/cancel');
    expect(matchPattern(p, '/v1/responses/resp_1/cancel')).toEqual({ id: 'resp_1' });
    expect(matchPattern(p, '/v1/responses/resp_1/cancelled')).toBeUndefined();
    expect(matchPattern(compilePattern('/a.b/{x}'), '/aXb/1')).toBeUndefined();
  });

  it('a PathSet answers exact paths and patterns', () => {
    const set = new PathSet(['/v1/models', '/v1/models/status', '/v1/models/{model...}']);
    expect(set.has('/v1/models')).toBe(true);
    expect(set.has('/v1/models/org/m')).toBe(true);
    expect(set.has('/v1/other')).toBe(false);
  });
});
