// `gw demo`: the gateway in front of one simulated backend per family (the same simulators the
// tests use), so a new user can call every route with no real backend and no GPU; and one more,
// an Ollama whose one GPU holds one of its two models at a time and takes `switchMs` to switch,
// behind a queue served by model (docs/guide/model-switching.md).
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { FakeBackend, FAKE_FAMILIES } from './index.js';
import { Gateway } from '../kernel/gateway.js';
import type { Plugin } from '../kernel/plugin.js';

/** The one-GPU simulator's models. */
export const ONE_GPU_MODELS = ['planner', 'coder'];

export async function startDemo(
  port: number,
  plugins: readonly Plugin[],
  host = 'localhost',
  switchMs = 5000,
): Promise<{ gateway: Gateway; fakes: FakeBackend[]; stop(): Promise<void> }> {
  const fakes: FakeBackend[] = [];
  for (const family of FAKE_FAMILIES) {
    fakes.push(await new FakeBackend({ family, name: `demo-${family}`, reply: `Hello from the simulated ${family} backend.` }).start());
  }
  const oneGpu = await new FakeBackend({
    family: 'localrunner',
    name: 'demo-one-gpu',
    reply: 'Hello from the simulated one-GPU Ollama.',
    models: ONE_GPU_MODELS.map((name) => ({ name })),
    modelsAtOnce: 1,
    switchMs,
  }).start();
  fakes.push(oneGpu);
  const dir = mkdtempSync(join(tmpdir(), 'gw-demo-'));
  const configFile = join(dir, 'config.yaml');
  writeFileSync(
    configFile,
    stringify({
      server: { host, port },
      discovery: {
        static: {
          endpoints: fakes.map((f) => ({ name: f.name, type: f.family, url: f.url, ...(f.gpu ? { model_switching: { models_at_once: 1 } } : {}) })),
        },
      },
    }),
  );
  const stopFakes = async () => {
    for (const f of fakes) await f.stop();
  };
  // Nothing left behind when it cannot start (the port taken, say): the gateway's health checks
  // and watchers would keep the process alive.
  const abandon = async (err: unknown, gateway?: Gateway): Promise<never> => {
    await gateway?.close();
    await stopFakes();
    rmSync(dir, { recursive: true, force: true });
    throw err;
  };
  const gateway = await Gateway.create({ configFile, env: {}, plugins }).catch((err) => abandon(err));
  await gateway.listen().catch((err) => abandon(err, gateway));
  return {
    gateway,
    fakes,
    /** Stops it all and removes its config folder: nothing is left behind. */
    async stop() {
      await gateway.close();
      await stopFakes();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
