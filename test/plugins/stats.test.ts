import { describe, expect, it } from 'vitest';
import { gwError } from '../../engine/core/errors.js';
import stats from '../../plugins/stats.js';
import { applyPlugin, stubContext, testEnv, attemptOf } from '../helpers/plugin.js';

describe('stats', () => {
  it('counts requests and 5xx failures per endpoint', () => {
    const env = testEnv();
    const hooks = applyPlugin(stats, {}, env);
    for (const status of [200, 502, 404]) {
      const { ctx } = stubContext(hooks);
      attemptOf(ctx).endpoint = { name: 'e1' } as never;
      ctx.status = status;
      hooks.done.call(ctx);
    }
    expect(env.stats.requestsTotal).toBe(3);
    expect(env.stats.requestsFailed).toBe(1);
    expect(env.stats.endpoint('e1')).toMatchObject({ requests: 3, errors: 1, clientErrors: 1 });
    expect(env.stats.requestsClientErrors).toBe(1);
  });

  it('counts a gateway error reply as a client error (4xx) or a failure (5xx), never as a broken reply', () => {
    const env = testEnv();
    const hooks = applyPlugin(stats, {}, env);
    for (const key of ['MODEL_NOT_FOUND', 'PATH_NOT_ALLOWED', 'PATH_NOT_SUPPORTED', 'ENDPOINT_UNAVAILABLE'] as const) {
      const { ctx, res } = stubContext(hooks);
      attemptOf(ctx).endpoint = { name: 'e1' } as never;
      // As the kernel answers an error: the error is set, then its envelope is the reply head.
      ctx.error = gwError(key, { model: 'm', path: '/p', provider: 'x' });
      ctx.errorAnswered = true;
      res.writeHead((ctx.error as { status: number }).status, []);
      hooks.done.call(ctx);
    }
    expect(env.stats).toMatchObject({ requestsTotal: 4, requestsFailed: 1, requestsClientErrors: 3 });
    expect(env.stats.endpoint('e1')).toMatchObject({ requests: 4, errors: 1, clientErrors: 3 });
  });

  it("a 429 is the client's only when it is the client's own rate limit: a full queue, an endpoint's rate or a backend's 429 is a failure", () => {
    const env = testEnv();
    const hooks = applyPlugin(stats, {}, env);
    const refusals = [
      gwError('RATE_LIMITED', { what: 'x', limit: 1, burst: 1, retryAfter: 1 }),
      gwError('QUEUE_FULL', { provider: 'x', endpoints: 'e1', retryAfter: 1 }),
      gwError('ENDPOINT_RATE_LIMITED', { provider: 'x', endpoints: 'e1', retryAfter: 1 }),
    ];
    for (const err of refusals) {
      const { ctx, res } = stubContext(hooks);
      ctx.error = err;
      ctx.errorAnswered = true;
      res.writeHead(429, []);
      hooks.done.call(ctx);
    }
    // The backend's own 429, relayed.
    const { ctx } = stubContext(hooks);
    attemptOf(ctx).endpoint = { name: 'e1' } as never;
    ctx.status = 429;
    hooks.done.call(ctx);
    expect(env.stats).toMatchObject({ requestsTotal: 4, requestsFailed: 3, requestsClientErrors: 1 });
    expect(env.stats.recentSuccessRate()).toBe(0);
  });
});
