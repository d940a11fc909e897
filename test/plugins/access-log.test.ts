import { describe, expect, it } from 'vitest';
import accessLog from '../../plugins/access-log.js';
import { applyPlugin, stubContext, testEnv } from '../helpers/plugin.js';

describe('access-log', () => {
  it('logs one line at info without the query string', () => {
    const env = testEnv();
    const hooks = applyPlugin(accessLog, {}, env);
    const { ctx } = stubContext(hooks, { method: 'POST', url: '/gw/hosted/v1/models?api_key=SECRET', prefix: '/gw/hosted' });
    ctx.pathname = '/v1/models';
    ctx.status = 200;
    hooks.done.call(ctx);
    expect(env.logs).toHaveLength(1);
    expect(env.logs[0]).toMatchObject({ level: 30, msg: 'request', method: 'POST', path: '/gw/hosted/v1/models', status: 200, req: ctx.id });
    expect(JSON.stringify(env.logs)).not.toContain('SECRET');
  });
  it('logs at debug when configured so', () => {
    const env = testEnv();
    const hooks = applyPlugin(accessLog, { level: 'debug' }, env);
    hooks.done.call(stubContext(hooks).ctx);
    expect(env.logs[0].level).toBe(20);
  });
});
