// Opt-in, against a real llama.cpp llama-server (set GW_LLAMA_SERVER_DIR to the folder holding
// start-llama-server.sh): the catalogue reads the context window the engine reports (its trained
// context, 2048 for the tiny model) rather than guessing, and keeps the per-slot serving context.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { endpoint, startGateway, type Started } from '../helpers/gateway.js';
import { LLAMA_SERVER_DIR, startLlamaServer, stopLlamaServers, type LlamaServer } from '../helpers/llama-server.js';

describe.skipIf(!LLAMA_SERVER_DIR)('a real llama-server', () => {
  let llama: LlamaServer;
  let gw: Started;
  beforeAll(async () => {
    // -c 2048 and 2 slots: the script's defaults, so each slot serves 1024.
    llama = await startLlamaServer('ctx-check');
    gw = await startGateway({ discovery: { static: { endpoints: [endpoint('llama', 'cppengine', llama.url)] } } });
  }, 120_000);
  afterAll(async () => {
    await gw?.close();
    stopLlamaServers([llama]);
  });

  it('reports its trained context (meta.n_ctx_train), and the serving n_ctx as metadata', async () => {
    const { models } = (await (await request(`${gw.url}/gw/models`)).body.json()) as any;
    expect(models).toHaveLength(1);
    expect(models[0]).toMatchObject({ id: 'ctx-check', provider: 'cppengine', context_window: 2048, metadata: { n_ctx: 1024 } });
    const paged = (await (await request(`${gw.url}/gw/models?format=pagedengine`)).body.json()) as any;
    expect(paged.data[0].max_model_len).toBe(2048);
  });
});
