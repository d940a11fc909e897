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
});
