// `gw demo`: the gateway in front of one simulated backend per family (the same simulators the
// tests use), so a new user can call every route with no real backend and no GPU.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { FakeBackend, FAKE_FAMILIES } from './index.js';
import { Gateway } from '../kernel/gateway.js';
import type { Plugin } from '../kernel/plugin.js';

export async function startDemo(
  port: number,
  plugins: readonly Plugin[],
  host = 'localhost',
): Promise<{ gateway: Gateway; fakes: FakeBackend[]; stop(): Promise<void> }> {
  const fakes: FakeBackend[] = [];
  for (const family of FAKE_FAMILIES) {
    fakes.push(await new FakeBackend({ family, name: `demo-${family}`, reply: `Hello from the simulated ${family} backend.` }).start());
  }
  const dir = mkdtempSync(join(tmpdir(), 'gw-demo-'));
  const configFile = join(dir, 'config.yaml');
  writeFileSync(
    configFile,
    stringify({
      server: { host, port },
      discovery: { static: { endpoints: fakes.map((f) => ({ name: f.name, type: f.family, url: f.url })) } },
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
