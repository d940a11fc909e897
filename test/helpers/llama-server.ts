// Real llama.cpp llama-servers for the opt-in tests: GW_LLAMA_SERVER_DIR names the folder with
// start-llama-server.sh (../shared/real-backends/). Each test starts its own servers on free
// ports and stops them after; without the variable those tests are skipped.
import { execFile } from 'node:child_process';
import { connect, createServer } from 'node:net';
import { join, resolve } from 'node:path';

/** The folder with start-llama-server.sh, or undefined: the tests that need it are skipped. */
export const LLAMA_SERVER_DIR = process.env.GW_LLAMA_SERVER_DIR;

/** A TCP port free on 127.0.0.1 right now. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer()
      .once('error', reject)
      .listen(0, '127.0.0.1', () => {
        const { port } = s.address() as { port: number };
        s.close(() => resolve(port));
      });
  });
}

export interface LlamaServer {
  url: string;
  port: number;
  pid: number;
}

/** Start a llama-server serving the tiny model as `alias` (extra `flags` go to llama-server) on
 *  `port` (default: a free one); resolves once it answers /health (the script waits), with its
 *  pid (the script's last line). */
export async function startLlamaServer(alias: string, flags: string[] = [], port?: number): Promise<LlamaServer> {
  if (!LLAMA_SERVER_DIR) throw new Error('GW_LLAMA_SERVER_DIR is not set: guard the test with describe.skipIf(!LLAMA_SERVER_DIR)');
  port ??= await freePort();
  const out = await new Promise<string>((resolve, reject) => {
    execFile(join(LLAMA_SERVER_DIR, 'start-llama-server.sh'), [String(port), alias, ...flags], { timeout: 90_000 }, (err, stdout, stderr) =>
      err ? reject(new Error(`${err.message}\n${stderr}`)) : resolve(stdout),
    );
  });
  return { url: `http://127.0.0.1:${port}`, port, pid: Number(out.trim().split('\n').at(-1)) };
}

/** Stop servers this test started (those that got started: a failed beforeAll leaves gaps). */
export function stopLlamaServers(servers: readonly (LlamaServer | undefined)[]): void {
  for (const s of servers) {
    if (!s?.pid) continue;
    try {
      process.kill(s.pid);
    } catch {
      // Gone already.
    }
  }
}

/** Has the process exited? (A stopping llama-server closes its listening socket first and may
 *  still answer on connections it already holds, such as a health checker's keep-alive one.) */
export function exited(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return false;
  } catch {
    return true;
  }
}

/** Does something accept connections on the port now? */
export function listening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect(port, '127.0.0.1');
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

export interface LlamaRouter extends LlamaServer {
  /** Models the router has loaded so far (each an instance spawned: its log says so). */
  loads(): number;
}

/** A llama-server in router mode (--models-dir: one model per file, loaded on demand; at most
 *  `modelsMax` at once), serving the tiny model under each of `names`; resolves once /health
 *  answers. The binary is the one start-llama-server.sh unpacks. */
export async function startLlamaRouter(names: readonly string[], modelsMax: number): Promise<LlamaRouter> {
  if (!LLAMA_SERVER_DIR) throw new Error('GW_LLAMA_SERVER_DIR is not set: guard the test with describe.skipIf(!LLAMA_SERVER_DIR)');
  const { mkdtempSync, symlinkSync, existsSync, openSync, readFileSync } = await import('node:fs');
  const { tmpdir } = await import('node:os');
  const { spawn, execFileSync } = await import('node:child_process');
  const bin = join(process.env.TMPDIR ?? '/tmp', `llama-server.${process.getuid?.() ?? 0}`);
  if (!existsSync(bin))
    execFileSync('sh', ['-c', `xz -dc "${join(LLAMA_SERVER_DIR, 'llama-server.xz')}" > "${bin}.part" && chmod +x "${bin}.part" && mv "${bin}.part" "${bin}"`]);
  const dir = mkdtempSync(join(tmpdir(), 'gw-router-'));
  // A link's target is read from where the link is: it must be absolute.
  const model = resolve(LLAMA_SERVER_DIR, 'tiny-llama.gguf');
  for (const name of names) symlinkSync(model, join(dir, `${name}.gguf`));
  const port = await freePort();
  const log = join(dir, 'router.log');
  const args = [
    '--models-dir',
    dir,
    '--models-max',
    String(modelsMax),
    '--host',
    '127.0.0.1',
    '--port',
    String(port),
    '-c',
    '2048',
    '-t',
    '1',
    '-np',
    '2',
    '--no-webui',
  ];
  const out = openSync(log, 'a');
  const child = spawn(bin, args, { stdio: ['ignore', out, out] });
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 240; i++) {
    if (child.exitCode !== null) throw new Error(`llama-server (router) exited:\n${readFileSync(log, 'utf8').slice(-2000)}`);
    try {
      if ((await fetch(`${url}/health`)).status === 200) {
        const loads = () => (readFileSync(log, 'utf8').match(/spawning server instance with name=/g) ?? []).length;
        return { url, port, pid: child.pid!, loads };
      }
    } catch {}
    await new Promise((r) => setTimeout(r, 250));
  }
  child.kill();
  throw new Error('llama-server (router) did not answer /health in 60 s');
}
