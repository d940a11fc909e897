// Opt-in, against a real llama.cpp llama-server (set GW_LLAMA_SERVER_DIR to the folder holding
// start-llama-server.sh): the catalogue reads the context window the engine reports (its trained
// context, 2048 for the tiny model) rather than guessing, and keeps the per-slot serving context.
import { execFileSync } from 'node:child_process';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { endpoint, startGateway, type Started } from '../helpers/gateway.js';

const dir = process.env.GW_LLAMA_SERVER_DIR;

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const { port } = server.address() as { port: number };
  await new Promise<void>((r) => server.close(() => r()));
  return port;
}

describe.skipIf(!dir)('a real llama-server', () => {
  let pid = 0;
  let gw: Started;
  beforeAll(async () => {
    const port = await freePort();
    // -c 2048 and 2 slots: the script's defaults, so each slot serves 1024.
    const out = execFileSync(join(dir!, 'start-llama-server.sh'), [String(port), 'ctx-check'], { encoding: 'utf8', timeout: 90_000 });
    pid = Number(out.trim().split('\n').at(-1));
    gw = await startGateway({ discovery: { static: { endpoints: [endpoint('llama', 'cppengine', `http://127.0.0.1:${port}`)] } } });
  }, 120_000);
  afterAll(async () => {
    await gw?.close();
    if (pid) process.kill(pid);
  });

  it('reports its trained context (meta.n_ctx_train), and the serving n_ctx as metadata', async () => {
    const { models } = (await (await request(`${gw.url}/gw/models`)).body.json()) as any;
    expect(models).toHaveLength(1);
    expect(models[0]).toMatchObject({ id: 'ctx-check', provider: 'cppengine', context_window: 2048, metadata: { n_ctx: 1024 } });
    const paged = (await (await request(`${gw.url}/gw/models?format=pagedengine`)).body.json()) as any;
    expect(paged.data[0].max_model_len).toBe(2048);
  });
});
