// A bug on a request's path costs that request, never the process: a throwing step gets a 500 in
// the error envelope (the log has the error), the endpoint is not blamed, and every other
// request is served.
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { BUILTIN_PIPELINES_DIR } from '../../../engine/core/paths.js';
import { FakeBackend } from '../../../engine/demo/index.js';
import { closeAll, endpoint, startGateway, type Started } from '../../helpers/gateway.js';

let fake: FakeBackend, gw: Started;
beforeAll(async () => {
  fake = await new FakeBackend({ family: 'pagedengine', name: 'paged' }).start();
  // The built-in proxy pipeline with the buggy plugin as its first step.
  const dir = mkdtempSync(join(tmpdir(), 'gw-pipes-'));
  const proxy = readFileSync(join(BUILTIN_PIPELINES_DIR, 'proxy.yaml'), 'utf8').replace('steps:\n', 'steps:\n  - use: explode\n');
  writeFileSync(join(dir, 'proxy.yaml'), proxy);
  writeFileSync(join(dir, 'silent.yaml'), 'name: silent\nmount: { paths: [/silent] }\nsteps:\n  - use: silent-terminal\n');
  gw = await startGateway({
    plugins: [resolve('test/fixtures/plugins/explode.mjs'), resolve('test/fixtures/plugins/silent-terminal.mjs')],
    pipelines: { dir },
    discovery: { static: { endpoints: [endpoint('paged', 'pagedengine', fake.url)] } },
  });
});
afterAll(() => closeAll(gw, [fake]));

async function chat(explodeAt?: string) {
  const res = await request(`${gw.url}/gw/pagedengine/v1/chat/completions`, {
    method: 'POST',
    body: '{"model":"test-model","messages":[]}',
    headers: explodeAt ? { 'x-explode': explodeAt } : {},
  });
  return { status: res.statusCode, headers: res.headers, json: (await res.body.json()) as any };
}

describe('a step that throws', () => {
  it.each(['request', 'request-async', 'upstream', 'respond'])('in %s: 500 in the envelope, logged, the gateway serves on', async (where) => {
    const r = await chat(where);
    expect(r.status).toBe(500);
    expect(r.json.error).toMatchObject({ type: 'internal_error', code: 'INTERNAL_ERROR' });
    expect(gw.logs.some((l) => l.level === 50 && String(l.err?.message).startsWith('boom'))).toBe(true);
    expect((await chat()).status).toBe(200);
    expect(gw.gw.runtime.endpoints.all[0].breaker.proxyFailures).toBe(0);
  });

  it('in done: the reply already went out; the error is logged', async () => {
    const r = await chat('done');
    expect(r.status).toBe(200);
    expect(gw.logs.some((l) => l.msg === 'done step failed')).toBe(true);
  });

  it('a step that puts CR, LF and Cyrillic in a reply header: the head is written, encoded', async () => {
    const r = await chat('header');
    expect(r.status).toBe(200);
    expect(r.headers['x-model-echo']).toBe('%D0%BC%D0%BE%D0%B4%D0%B5%D0%BB%D1%8C%0D%0Ax-injected: 1');
    expect(r.headers['x-injected']).toBeUndefined();
  });

  it('a step that answers without saying so: one answer, the terminal step does not run', async () => {
    const before = fake.traffic.length;
    const res = await request(`${gw.url}/gw/pagedengine/v1/chat/completions`, {
      method: 'POST',
      body: '{"model":"test-model","messages":[]}',
      headers: { 'x-explode': 'answer-no-bail' },
    });
    expect(res.statusCode).toBe(200);
    expect(await res.body.text()).toBe('answered early');
    expect(fake.traffic.length).toBe(before);
  });

  it('a head the kernel cannot write: a 500 whose headers appear once', async () => {
    const r = await chat('bad-status');
    expect(r.status).toBe(500);
    expect(String(r.headers['x-gw-request-id'])).not.toContain(',');
    expect(r.json.error.code).toBe('INTERNAL_ERROR');
  });
});

describe('a terminal step that answers nothing', () => {
  it('gets a 500 instead of leaving the client waiting', async () => {
    const res = await request(`${gw.url}/silent`);
    expect(res.statusCode).toBe(500);
    expect(((await res.body.json()) as any).error.code).toBe('INTERNAL_ERROR');
    expect(gw.logs.some((l) => String(l.err?.message).includes('no step answered the request'))).toBe(true);
  });
});
