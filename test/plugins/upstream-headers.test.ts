import { describe, expect, it } from 'vitest';
import upstreamHeaders from '../../plugins/upstream-headers.js';
import { applyPlugin, header, profiles, stubContext, testEnv, attemptOf } from '../helpers/plugin.js';

const endpoint = { name: 'e', headers: ['x-team', 'ops', 'authorization', 'Basic abc'], headerNames: new Set(['x-team', 'authorization']) };

function upstream(family: string, headers: Record<string, string>, method = 'POST') {
  const hooks = applyPlugin(upstreamHeaders, {}, testEnv({ profile: profiles.byName.get(family) }));
  const { ctx } = stubContext(hooks, { method, headers });
  attemptOf(ctx).endpoint = { ...endpoint, profile: profiles.byName.get(family) } as never;
  const up = { method, path: '/x', headers: [] as string[], body: null };
  hooks.upstream.call(ctx, up);
  return { up, ctx };
}

describe('upstream-headers', () => {
  it('lets endpoint headers and auth replace the client ones, once', () => {
    const { up } = upstream('pagedengine', { Authorization: 'Bearer client', 'X-Team': 'dev', Accept: 'text/event-stream' });
    expect(up.headers.filter((h) => h === 'authorization')).toHaveLength(1);
    expect(header(up.headers, 'authorization')).toBe('Basic abc');
    expect(header(up.headers, 'x-team')).toBe('ops');
    expect(header(up.headers, 'accept')).toBe('text/event-stream');
  });
  it('adds the request id and client address; forwarded host only for the runner families', () => {
    const { up, ctx } = upstream('localrunner', { Host: 'gw.local:40114' });
    expect(header(up.headers, 'x-gw-request-id')).toBe(ctx.id);
    expect(header(up.headers, 'x-forwarded-for')).toBe('127.0.0.1');
    expect(header(up.headers, 'x-forwarded-host')).toBe('gw.local:40114');
    expect(header(up.headers, 'host')).toBeUndefined();
    expect(header(upstream('pagedengine', { Host: 'h' }).up.headers, 'x-forwarded-host')).toBeUndefined();
  });
  it('keeps the client content type and only adds JSON to a POST without one', () => {
    expect(header(upstream('pagedengine', { 'Content-Type': 'multipart/form-data; boundary=x' }).up.headers, 'content-type')).toBe(
      'multipart/form-data; boundary=x',
    );
    expect(header(upstream('pagedengine', {}).up.headers, 'content-type')).toBe('application/json');
    expect(header(upstream('pagedengine', {}, 'GET').up.headers, 'content-type')).toBeUndefined();
  });
});
