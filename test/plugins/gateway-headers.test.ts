import { describe, expect, it } from 'vitest';
import gatewayHeaders from '../../plugins/gateway-headers.js';
import { applyPlugin, header, profiles, stubContext, testEnv, attemptOf } from '../helpers/plugin.js';

describe('gateway-headers', () => {
  it('adds request id, endpoint, model, family and timing', () => {
    const hooks = applyPlugin(gatewayHeaders, {}, testEnv({ profile: profiles.byName.get('pagedengine') }));
    const { ctx } = stubContext(hooks, { headers: { 'x-request-id': 'abc' } });
    ctx.body = Buffer.from('{"model":"Qwen2.5"}');
    attemptOf(ctx).endpoint = { name: 'gpu-1', family: 'pagedengine' } as never;
    hooks.respond.call(ctx, 200);
    expect(header(ctx.replyHeaders, 'x-gw-request-id')).toBe('abc');
    expect(header(ctx.replyHeaders, 'x-gw-endpoint')).toBe('gpu-1');
    expect(header(ctx.replyHeaders, 'x-gw-model')).toBe('Qwen2.5');
    expect(header(ctx.replyHeaders, 'x-gw-backend-type')).toBe('pagedengine');
    expect(header(ctx.replyHeaders, 'x-gw-response-time')).toMatch(/^\d+(\.\d+)?ms$/);
  });
  it('prefers the model the routing chose over the body', () => {
    const hooks = applyPlugin(gatewayHeaders);
    const { ctx } = stubContext(hooks);
    ctx.body = Buffer.from('{"model":"alias"}');
    attemptOf(ctx).model = 'real-name';
    hooks.respond.call(ctx, 200);
    expect(header(ctx.replyHeaders, 'x-gw-model')).toBe('real-name');
    expect(header(ctx.replyHeaders, 'x-gw-endpoint')).toBeUndefined();
  });
});
