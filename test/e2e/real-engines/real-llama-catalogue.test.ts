// Opt-in: the cppengine family's allowlist and model lists in front of real llama.cpp
// llama-servers. Runs only when GW_LLAMA_SERVER_DIR names the folder with start-llama-server.sh
// (../shared/real-backends/); it starts two servers (two aliases: one model each, as the engine
// serves) on free ports and stops them after. Random weights: the text is gibberish, the routes real.
import OpenAI from 'openai';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeAll, endpoint, startGateway, type Started } from '../../helpers/gateway.js';
import { LLAMA_SERVER_DIR, startLlamaServer, stopLlamaServers, type LlamaServer } from '../../helpers/llama-server.js';

describe.skipIf(!LLAMA_SERVER_DIR)('cppengine in front of real llama-servers', () => {
  let a: LlamaServer, b: LlamaServer, gw: Started;
  const get = async (path: string, init: Parameters<typeof request>[1] = {}) => {
    const res = await request(`${gw.url}/gw/cppengine${path}`, init);
    return { status: res.statusCode, endpoint: res.headers['x-gw-endpoint'], json: (await res.body.json()) as any };
  };

  beforeAll(async () => {
    a = await startLlamaServer('tiny-a');
    b = await startLlamaServer('tiny-b');
    gw = await startGateway({ discovery: { static: { endpoints: [endpoint('llama-a', 'cppengine', a.url), endpoint('llama-b', 'cppengine', b.url)] } } });
  }, 120_000);
  afterAll(async () => {
    await closeAll(gw, []);
    stopLlamaServers([a, b]);
  });

  it("lists both servers' models on every call, and retrieves each through the openai client", async () => {
    for (let i = 0; i < 3; i++) expect((await get('/v1/models')).json.data.map((m: any) => m.id)).toEqual(['tiny-a', 'tiny-b']);
    const client = new OpenAI({ baseURL: `${gw.url}/gw/cppengine/v1`, apiKey: 'x', maxRetries: 0 });
    expect(await client.models.retrieve('tiny-b')).toMatchObject({ id: 'tiny-b', object: 'model' });
    await expect(client.models.retrieve('tiny-c')).rejects.toBeInstanceOf(OpenAI.NotFoundError);
  });

  it("forwards the server's own routes: props, slots, apply-template, tokenize, count_tokens", async () => {
    expect((await get('/props')).json).toHaveProperty('default_generation_settings');
    expect((await get('/slots')).json[0]).toHaveProperty('n_ctx');
    const body = JSON.stringify({ messages: [{ role: 'user', content: 'hi' }] });
    expect((await get('/apply-template', { method: 'POST', body, headers: { 'content-type': 'application/json' } })).json.prompt).toContain('hi');
    expect(
      (await get('/tokenize', { method: 'POST', body: '{"content":"hello"}', headers: { 'content-type': 'application/json' } })).json.tokens.length,
    ).toBeGreaterThan(0);
    const count = await get('/v1/messages/count_tokens', {
      method: 'POST',
      body: JSON.stringify({ model: 'tiny-a', messages: [{ role: 'user', content: 'hello there' }] }),
      headers: { 'content-type': 'application/json' },
    });
    expect(count).toMatchObject({ status: 200, endpoint: 'llama-a' });
    expect(count.json.input_tokens).toBeGreaterThan(0);
  });
});
