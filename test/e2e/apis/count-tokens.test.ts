// count_tokens beyond the happy path: the backend's count in the spec's shape, the estimate
// whenever no backend can count it (a build without the path, whatever its 404 body; endpoints
// down or behind an open breaker; passthrough switched off), and the request in the statistics.
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from 'undici';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { FakeBackend } from '../../../engine/demo/index.js';
import { BUILTIN_PIPELINES_DIR } from '../../../engine/core/paths.js';
import { closeAll, endpoint, startGateway, type Started } from '../../helpers/gateway.js';
import { waitFor } from '../../helpers/wait.js';

let cpp: FakeBackend, chat: FakeBackend, gw: Started;
/** Gateways and fakes a test starts for itself. */
let own: { gw: Started | null; fakes: FakeBackend[] } = { gw: null, fakes: [] };

beforeAll(async () => {
  cpp = await new FakeBackend({ family: 'cppengine', name: 'cpp', models: [{ name: 'cpp-chat' }] }).start();
  chat = await new FakeBackend({ family: 'mlxsingle', name: 'chat', models: [{ name: 'qwen-chat' }] }).start();
  gw = await startGateway({ discovery: { static: { endpoints: [endpoint('cpp', 'cppengine', cpp.url), endpoint('chat', 'mlxsingle', chat.url)] } } });
});
afterAll(() => closeAll(gw, [cpp, chat]));
beforeEach(() => {
  cpp.reset();
  chat.reset();
});
afterEach(async () => {
  await closeAll(own.gw, own.fakes);
  own = { gw: null, fakes: [] };
});

/** 40 characters: an estimate of 10 tokens. */
const BODY = (model: string) => JSON.stringify({ model, messages: [{ role: 'user', content: 'x'.repeat(40) }] });
const ESTIMATE = { input_tokens: 10, output_tokens: 0, total_tokens: 10 };

async function count(base: string, model = 'cpp-chat') {
  const res = await request(`${base}/gw/msgapi/v1/messages/count_tokens`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: BODY(model),
  });
  const text = await res.body.text();
  return { status: res.statusCode, source: res.headers['x-gw-token-count'], endpoint: res.headers['x-gw-endpoint'], body: JSON.parse(text) };
}

describe('a backend that counts', () => {
  it("gets its count back in the spec's shape: output_tokens 0 and total_tokens added", async () => {
    const r = await count(gw.url);
    expect(cpp.traffic[0].url).toBe('/v1/messages/count_tokens');
    // The fake, like llama.cpp, answers {input_tokens} only: one token per word plus 4 per message.
    expect(r).toMatchObject({ status: 200, source: 'backend', body: { input_tokens: 5, output_tokens: 0, total_tokens: 5 } });
    expect(Object.keys(r.body)).toEqual(['input_tokens', 'output_tokens', 'total_tokens']);
  });

  it("without the path, answers with the estimate however large the backend's 404 page is", async () => {
    cpp.behaviour.status = 404;
    cpp.behaviour.errorBody = { contentType: 'text/html', body: `<html>${'Not Found '.repeat(20 * 1024)}</html>` };
    expect(await count(gw.url)).toMatchObject({ status: 200, source: 'estimate', body: ESTIMATE });
    expect(cpp.traffic).toHaveLength(1);
  });

  it('is counted in the traffic statistics', async () => {
    const requestsOf = async (name: string) => ((await (await request(`${gw.url}/internal/status`)).body.json()) as any).endpoints[name].requests as number;
    const before = await requestsOf('cpp');
    expect((await count(gw.url)).source).toBe('backend');
    await waitFor(async () => (await requestsOf('cpp')) === before + 1, 'the count_tokens request counted against cpp');
  });
});

describe('no backend can count it now: the estimate, which needs none', () => {
  it("when the model's endpoints are down, its alias's too, and when no endpoint is routable at all", async () => {
    const down = await new FakeBackend({ family: 'cppengine', name: 'down', models: [{ name: 'cpp-chat' }] }).start();
    const up = await new FakeBackend({ family: 'mlxsingle', name: 'up', models: [{ name: 'qwen-chat' }] }).start();
    own.fakes = [down, up];
    own.gw = await startGateway({
      discovery: { static: { endpoints: [endpoint('down', 'cppengine', down.url), endpoint('up', 'mlxsingle', up.url)] } },
      model_aliases: { coder: ['cpp-chat'] },
    });
    const g = own.gw;
    const [downEp, upEp] = ['down', 'up'].map((n) => g.gw.runtime.endpoints.all.find((e) => e.name === n)!);
    await waitFor(() => g.gw.runtime.catalogue.servedByAny('cpp-chat').length === 1 && upEp.routable, 'cpp-chat discovered and up routable');
    // Stopped (a backend that fails only its health route would answer the messages request's
    // last-resort try, and be back).
    await down.stop();
    await waitFor(() => !downEp.routable, 'the cppengine endpoint out of rotation');

    // Before: 503 MODEL_UNAVAILABLE; the messages route still says so (its last-resort try refused).
    expect(await count(g.url)).toMatchObject({ status: 200, source: 'estimate', body: ESTIMATE });
    expect(await count(g.url, 'coder')).toMatchObject({ status: 200, source: 'estimate', body: ESTIMATE });
    const messages = await request(`${g.url}/gw/msgapi/v1/messages`, {
      method: 'POST',
      body: JSON.stringify({ model: 'cpp-chat', max_tokens: 8, messages: [{ role: 'user', content: 'x' }] }),
    });
    expect(messages.statusCode).toBe(503);
    await messages.body.dump();
    // A model nobody serves is still unknown.
    expect((await count(g.url, 'no-such-model')).status).toBe(404);

    up.behaviour.healthStatus = 500;
    await waitFor(() => !upEp.routable, 'no endpoint routable');
    expect(await count(g.url)).toMatchObject({ status: 200, source: 'estimate', body: ESTIMATE });
    expect(down.traffic).toHaveLength(0);
  });

  it("when the only counting endpoint's circuit breaker is open", async () => {
    const solo = await new FakeBackend({ family: 'cppengine', name: 'solo', models: [{ name: 'cpp-chat' }] }).start();
    own.fakes = [solo];
    own.gw = await startGateway({
      proxy: { circuit_breaker: { open_timeout: '10m', initial_open_timeout: '10m' } },
      discovery: { static: { endpoints: [endpoint('solo', 'cppengine', solo.url, { check_interval: '60s' })] } },
    }); // no passing check closes the breaker
    const ep = own.gw.gw.runtime.endpoints.all[0];
    await waitFor(() => ep.routable, 'the endpoint routable');
    solo.behaviour.status = 500;
    for (let i = 0; i < 20 && ep.breaker.state !== 'open'; i++) expect((await count(own.gw.url)).status).toBe(500);
    expect(ep.breaker.state).toBe('open');
    const sent = solo.traffic.length;
    const r = await count(own.gw.url);
    expect(r).toMatchObject({ status: 200, source: 'estimate', body: ESTIMATE });
    expect(r.endpoint).toBeUndefined();
    expect(solo.traffic).toHaveLength(sent);
  });
});

describe('passthrough switched off', () => {
  it('with translators.msgapi.passthrough: false, count_tokens is estimated and messages translated', async () => {
    own.gw = await startGateway({
      translators: { msgapi: { passthrough: false } },
      discovery: { static: { endpoints: [endpoint('cpp', 'cppengine', cpp.url)] } },
    });
    expect(await count(own.gw.url)).toMatchObject({ status: 200, source: 'estimate', body: ESTIMATE });
    expect(cpp.traffic).toHaveLength(0);
    const res = await request(`${own.gw.url}/gw/msgapi/v1/messages`, {
      method: 'POST',
      body: JSON.stringify({ model: 'cpp-chat', max_tokens: 8, messages: [{ role: 'user', content: 'x' }] }),
    });
    await res.body.dump();
    expect(res.statusCode).toBe(200);
    expect(res.headers['x-gw-mode']).toBeUndefined();
    expect(cpp.traffic.map((t) => t.url)).toEqual(['/v1/chat/completions']);
  });

  it("with the count-tokens step's own passthrough: false", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'gw-pipelines-'));
    const yaml = readFileSync(join(BUILTIN_PIPELINES_DIR, 'msgapi-count-tokens.yaml'), 'utf8').replace(
      /- use: count-tokens.*/,
      '- use: count-tokens\n    with: { passthrough: false }',
    );
    writeFileSync(join(dir, 'msgapi-count-tokens.yaml'), yaml);
    own.gw = await startGateway({ pipelines: { dir }, discovery: { static: { endpoints: [endpoint('cpp', 'cppengine', cpp.url)] } } });
    expect(await count(own.gw.url)).toMatchObject({ status: 200, source: 'estimate', body: ESTIMATE });
    expect(cpp.traffic).toHaveLength(0);
  });
});
