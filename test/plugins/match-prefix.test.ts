import { describe, expect, it } from 'vitest';
import matchPrefix from '../../plugins/match-prefix.js';
import { applyPlugin, stubContext } from '../helpers/plugin.js';

const strip = async (url: string, prefix = '/gw/localrunner') => {
  const hooks = applyPlugin(matchPrefix);
  const { ctx } = stubContext(hooks, { url, prefix });
  await hooks.request.promise(ctx);
  return [ctx.path, ctx.pathname];
};

describe('match-prefix', () => {
  it('strips the prefix and keeps the query', async () => {
    expect(await strip('/gw/localrunner/api/tags?verbose=1&x=%20')).toEqual(['/api/tags?verbose=1&x=%20', '/api/tags']);
  });
  it('maps the bare prefix to /', async () => {
    expect(await strip('/gw/localrunner')).toEqual(['/', '/']);
    expect(await strip('/gw/localrunner?q=1')).toEqual(['/?q=1', '/']);
    expect(await strip('/gw/localrunner/')).toEqual(['/', '/']);
  });
  it('keeps encoded characters as sent', async () => {
    expect(await strip('/gw/desk-runner/v1/models/a%2Fb', '/gw/desk-runner')).toEqual(['/v1/models/a%2Fb', '/v1/models/a%2Fb']);
  });
  it('cuts at the next slash when the router matched an encoded spelling of the prefix', async () => {
    expect(await strip('/gw/desk%2Drunner/v1/models', '/gw/desk-runner')).toEqual(['/v1/models', '/v1/models']);
  });
});
