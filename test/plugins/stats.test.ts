import { describe, expect, it } from 'vitest';
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
    expect(env.stats.endpoint('e1')).toMatchObject({ requests: 3, errors: 1 });
  });
});
