// Start a real gateway on 127.0.0.1:0 from a config object, with logs captured as objects.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { Gateway } from '../../engine/kernel/gateway.js';
import { BUILTIN_PLUGINS } from '../../plugins/index.js';
import type { FakeBackend } from '../../engine/demo/index.js';

export interface Started {
  gw: Gateway;
  url: string;
  logs: Record<string, any>[];
  configFile: string;
  close(): Promise<void>;
}

export function writeConfig(config: Record<string, any>, dir = mkdtempSync(join(tmpdir(), 'gw-test-'))): string {
  const file = join(dir, 'config.yaml');
  writeFileSync(file, stringify(config));
  return file;
}

export function memoryLogs(): { logs: Record<string, any>[]; destination: { write(line: string): void } } {
  const logs: Record<string, any>[] = [];
  return { logs, destination: { write: (line: string) => void logs.push(JSON.parse(line)) } };
}

/** endpoint shorthand: [name, type, url, extra] */
export function endpoint(name: string, type: string, url: string, extra: Record<string, unknown> = {}) {
  return { name, type, url, check_interval: '200ms', check_timeout: '500ms', ...extra };
}

/** Rate limits off: tests send many requests from one address; those about the limits set their own. */
export const NO_RATE_LIMITS = {
  global_requests_per_minute: 0,
  per_ip_requests_per_minute: 0,
  health_requests_per_minute: 0,
  internal_requests_per_minute: 0,
  per_endpoint: { default_requests_per_minute: 0 },
};

export async function startGateway(config: Record<string, any>, env: NodeJS.ProcessEnv = {}, clock?: () => number): Promise<Started> {
  const full = {
    ...config,
    server: { host: '127.0.0.1', port: 0, shutdown_timeout: '2s', rate_limits: NO_RATE_LIMITS, ...(config.server ?? {}) },
    logging: { level: 'debug', ...(config.logging ?? {}) },
    proxy: { profiles_dir: '/nonexistent/profiles', ...(config.proxy ?? {}) },
    pipelines: { dir: '/nonexistent/pipelines', ...(config.pipelines ?? {}) },
  };
  const configFile = writeConfig(full);
  const { logs, destination } = memoryLogs();
  const gw = await Gateway.create({ configFile, env, logDestination: destination, plugins: BUILTIN_PLUGINS, clock });
  const addr = await gw.listen();
  return { gw, url: `http://127.0.0.1:${addr.port}`, logs, configFile, close: () => gw.close() };
}

/** Close what a test started: its gateway, then its fakes. */
export async function closeAll(gw: Started | null, fakes: readonly FakeBackend[]): Promise<void> {
  await gw?.close();
  for (const f of fakes) await f.stop();
}
