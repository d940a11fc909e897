// Opt-in, against a real llama.cpp llama-server (set GW_LLAMA_SERVER_DIR to the folder holding
// start-llama-server.sh): the catalogue reads the context window the engine reports rather than
// guessing: the context each slot serves (1024: -c 2048 over 2 slots), what a request can use,
// as /props says too; the trained context (2048) is kept as metadata.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { endpoint, startGateway, type Started } from '../../helpers/gateway.js';
import { LLAMA_SERVER_DIR, startLlamaServer, stopLlamaServers, type LlamaServer } from '../../helpers/llama-server.js';

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

  it("reports the per-slot context a request can use (the server's /props agrees), the trained one as metadata", async () => {
    const props = (await (await request(`${llama.url}/props`)).body.json()) as any;
    expect([props.default_generation_settings.n_ctx, props.total_slots]).toEqual([1024, 2]);
    const { models } = (await (await request(`${gw.url}/gw/models`)).body.json()) as any;
    expect(models).toHaveLength(1);
    expect(models[0]).toMatchObject({ id: 'ctx-check', provider: 'cppengine', context_window: 1024, metadata: { n_ctx: 1024, n_ctx_train: 2048 } });
    const paged = (await (await request(`${gw.url}/gw/models?format=pagedengine`)).body.json()) as any;
    expect(paged.data[0].max_model_len).toBe(1024);
  });
});
