import { describe, expect, it } from 'vitest';
import readBody from '../../plugins/read-body.js';
import { applyPlugin, stubContext } from '../helpers/plugin.js';

const read = async (opts: Parameters<typeof stubContext>[1], max?: number) => {
  const hooks = applyPlugin(readBody, max ? { max_bytes: max } : {});
  const { ctx } = stubContext(hooks, opts);
  await hooks.request.promise(ctx);
  return ctx;
};

describe('read-body', () => {
  it('reads a body sent in pieces into one buffer', async () => {
    const ctx = await read({ method: 'POST', headers: { 'transfer-encoding': 'chunked' }, body: [Buffer.from('{"model":'), Buffer.from('"m"}')] });
    expect(ctx.body!.toString()).toBe('{"model":"m"}');
    expect(ctx.model).toBe('m');
  });
  it('skips requests without a body', async () => {
    expect((await read({ method: 'GET' })).body).toBeNull();
  });
  it('refuses a declared length over the limit before reading', async () => {
    await expect(read({ method: 'POST', headers: { 'content-length': '11' }, body: 'x'.repeat(11) }, 10)).rejects.toMatchObject({
      status: 413,
      code: 'BODY_TOO_LARGE',
    });
  });
  it('refuses a chunked body that grows past the limit', async () => {
    await expect(read({ method: 'POST', headers: { 'transfer-encoding': 'chunked' }, body: [Buffer.alloc(6), Buffer.alloc(6)] }, 10)).rejects.toMatchObject({
      status: 413,
    });
  });
  it('leaves a non-JSON body alone', async () => {
    const ctx = await read({ method: 'POST', headers: { 'content-length': '5' }, body: 'hello' });
    expect(ctx.bodyJson()).toBeUndefined();
    expect(ctx.body!.toString()).toBe('hello');
  });
});
