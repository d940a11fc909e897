import { describe, expect, it } from 'vitest';
import cors from '../../plugins/cors.js';
import { applyPlugin, header, stubContext } from '../helpers/plugin.js';

describe('cors', () => {
  it('adds the spec CORS headers and lets the request continue', async () => {
    const hooks = applyPlugin(cors);
    const { ctx, res } = stubContext(hooks, { method: 'POST' });
    expect(await hooks.request.promise(ctx)).toBeUndefined();
    expect(header(ctx.replyHeaders, 'access-control-allow-origin')).toBe('*');
    expect(header(ctx.replyHeaders, 'access-control-allow-methods')).toBe('GET, POST, OPTIONS');
    expect(header(ctx.replyHeaders, 'access-control-allow-headers')).toBe('Content-Type, Authorization');
    expect(header(ctx.replyHeaders, 'access-control-expose-headers')).toContain('X-Gw-Request-Id');
    expect(res.ended).toBe(false);
  });

  it('answers OPTIONS itself with 204 and stops the pipeline', async () => {
    const hooks = applyPlugin(cors, { allow_origin: 'https://app.example' });
    const { ctx, res } = stubContext(hooks, { method: 'OPTIONS' });
    expect(await hooks.request.promise(ctx)).toBe(true);
    expect(res.status).toBe(204);
    expect(header(res.headers, 'access-control-allow-origin')).toBe('https://app.example');
    expect(res.ended).toBe(true);
  });

  it('grants a preflight the headers and method it asks for (browser SDKs send their own)', async () => {
    const hooks = applyPlugin(cors);
    const asked = 'anthropic-version, x-api-key, x-stainless-os, x-stainless-retry-count, content-type';
    const { ctx, res } = stubContext(hooks, {
      method: 'OPTIONS',
      headers: { 'access-control-request-headers': asked, 'access-control-request-method': 'DELETE' },
    });
    expect(await hooks.request.promise(ctx)).toBe(true);
    expect(res.status).toBe(204);
    expect(header(res.headers, 'access-control-allow-headers')).toBe(`Content-Type, Authorization, ${asked}`);
    expect(header(res.headers, 'access-control-allow-methods')).toBe('GET, POST, OPTIONS, DELETE');
    expect(header(res.headers, 'vary')).toContain('Access-Control-Request-Headers');
    expect(header(res.headers, 'access-control-allow-private-network')).toBeUndefined();
  });

  it('echoes only a clean list of header names, and only when allowed', async () => {
    for (const asked of ['x-ok, bad header', 'x-a\r\nx-b', `x-${'a'.repeat(5000)}`]) {
      const hooks = applyPlugin(cors);
      const { ctx, res } = stubContext(hooks, {
        method: 'OPTIONS',
        headers: { 'access-control-request-headers': asked, 'access-control-request-method': 'TRACE' },
      });
      await hooks.request.promise(ctx);
      expect(header(res.headers, 'access-control-allow-headers')).toBe('Content-Type, Authorization');
      expect(header(res.headers, 'access-control-allow-methods')).toBe('GET, POST, OPTIONS');
    }
    const hooks = applyPlugin(cors, { allow_requested: false });
    const { ctx, res } = stubContext(hooks, { method: 'OPTIONS', headers: { 'access-control-request-headers': 'x-api-key' } });
    await hooks.request.promise(ctx);
    expect(header(res.headers, 'access-control-allow-headers')).toBe('Content-Type, Authorization');
  });

  it('answers a Private Network Access preflight', async () => {
    const hooks = applyPlugin(cors);
    const { ctx, res } = stubContext(hooks, { method: 'OPTIONS', headers: { 'access-control-request-private-network': 'true' } });
    await hooks.request.promise(ctx);
    expect(header(res.headers, 'access-control-allow-private-network')).toBe('true');
  });
});
