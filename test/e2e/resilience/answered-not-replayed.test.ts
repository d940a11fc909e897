// Once a backend's reply head arrived the backend has run the request: a reply that breaks after
// that is never sent to the next endpoint, even on a replay-safe route and even while a buffer
// plan still holds it (nothing reached the client yet). The client gets the broken-reply error,
// as it would from a piped reply — never a second execution of the same generation.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { FakeBackend } from '../../../engine/demo/index.js';
import { closeAll, endpoint, startGateway, type Started } from '../../helpers/gateway.js';

let radixA: FakeBackend, radixB: FakeBackend, hostedA: FakeBackend, hostedB: FakeBackend, gw: Started;
const fakes = () => [radixA, radixB, hostedA, hostedB];

beforeAll(async () => {
  radixA = await new FakeBackend({ family: 'radixengine', name: 'radix-a', models: [{ name: 'Qwen2.5-7B' }] }).start();
  radixB = await new FakeBackend({ family: 'radixengine', name: 'radix-b', models: [{ name: 'Qwen2.5-7B' }] }).start();
  hostedA = await new FakeBackend({ family: 'hosted-compatible', name: 'hosted-a', models: [{ name: 'gpt-4o-mini' }] }).start();
  hostedB = await new FakeBackend({ family: 'hosted-compatible', name: 'hosted-b', models: [{ name: 'gpt-4o-mini' }] }).start();
  // The `-a` endpoints come first; health checks far apart, so only the proxy path sees a failure.
  const ep = (f: FakeBackend, type: string, priority: number) => endpoint(f.name, type, f.url, { priority, check_interval: '60s' });
  gw = await startGateway({
    discovery: {
      static: { endpoints: [ep(radixA, 'radixengine', 100), ep(radixB, 'radixengine', 50), ep(hostedA, 'hosted', 100), ep(hostedB, 'hosted', 50)] },
    },
  });
});
afterAll(() => closeAll(gw, fakes()));
beforeEach(() => fakes().forEach((f) => f.reset()));

const post = async (path: string, body: unknown) => {
  const res = await request(`${gw.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const text = await res.body.text();
  return { status: res.statusCode, headers: res.headers, json: JSON.parse(text) };
};
const chat = (model: string) => ({ model, messages: [{ role: 'user', content: 'write a long story' }], stream: false });

describe('a reply that breaks after its head arrived is not sent to the next endpoint', () => {
  it('radixengine chat (held for X-Radix-Cache-Hit): 502 UPSTREAM_STREAM_BROKEN, the second endpoint never called', async () => {
    radixA.behaviour.cutBodyAt = 20;
    const r = await post('/gw/radixengine/v1/chat/completions', chat('Qwen2.5-7B'));
    expect(r.status).toBe(502);
    expect(r.headers['x-gw-endpoint']).toBe('radix-a');
    expect(r.json.error.code).toBe('UPSTREAM_STREAM_BROKEN');
    expect(r.json.error.message).toMatch(/^endpoint radix-a broke off the reply .*the reply is incomplete$/);
    expect(radixA.executions).toBe(1);
    expect(radixB.traffic).toHaveLength(0);
  });

  it('radixengine native generate: the same', async () => {
    radixA.behaviour.cutBodyAt = 20;
    const r = await post('/gw/radixengine/generate', { text: 'Once upon a time', sampling_params: { max_new_tokens: 64 } });
    expect(r.status).toBe(502);
    expect(r.json.error.code).toBe('UPSTREAM_STREAM_BROKEN');
    expect(radixA.executions).toBe(1);
    expect(radixB.traffic).toHaveLength(0);
  });

  it("a hosted error body (held to add gw_context): the backend's failure, not a retry", async () => {
    hostedA.behaviour.status = 429;
    hostedA.behaviour.errorBody = {
      contentType: 'application/json',
      body: JSON.stringify({ error: { message: 'Rate limit reached for this organisation', type: 'requests' } }),
    };
    hostedA.behaviour.cutBodyAt = 20;
    const r = await post('/gw/hosted/v1/chat/completions', chat('gpt-4o-mini'));
    expect(r.status).toBe(502);
    expect(r.json.error.code).toBe('UPSTREAM_STREAM_BROKEN');
    expect(r.json.error.message).toMatch(/^endpoint hosted-a broke off the reply/);
    expect(hostedA.traffic).toHaveLength(1);
    expect(hostedB.traffic).toHaveLength(0);
  });

  it('a messages request translated to chat-completions (held whole to translate): the same', async () => {
    hostedA.behaviour.cutBodyAt = 20;
    const res = await request(`${gw.url}/gw/msgapi/v1/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'gpt-4o-mini', max_tokens: 64, messages: [{ role: 'user', content: 'write a long story' }] }),
    });
    const body = (await res.body.json()) as any;
    expect(res.statusCode).toBe(502);
    expect(body).toMatchObject({ type: 'error', error: { code: 'UPSTREAM_STREAM_BROKEN' } });
    expect(hostedA.executions).toBe(1);
    expect(hostedB.traffic).toHaveLength(0);
  });

  it('a failure before the head still goes to the next endpoint (nothing ran to completion there)', async () => {
    radixA.behaviour.resetBeforeResponse = true;
    const r = await post('/gw/radixengine/v1/chat/completions', chat('Qwen2.5-7B'));
    expect(r.status).toBe(200);
    expect(r.headers['x-gw-endpoint']).toBe('radix-b');
    expect(radixB.executions).toBe(1);
  });
});
