// The command line as users and scripts run it: bin/gw.js from the built package, in a child
// process with a clean environment (no GW_* variables from the shell running the tests).
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

export const GW = resolve('bin/gw.js');
export const emptyDir = () => mkdtempSync(join(tmpdir(), 'gw-cli-'));
export const cleanEnv = () => {
  const env = { ...process.env };
  for (const k of Object.keys(env)) if (k.startsWith('GW_')) delete env[k];
  return env;
};

/** Run the CLI to its end. One that does not end within the test's budget (a command that was
 *  meant to refuse and serves instead) is killed, so that no test leaves a gateway behind. */
export function run(args: string[], opts: { cwd?: string; env?: NodeJS.ProcessEnv } = {}): Promise<{ code: number | null; out: string; err: string }> {
  return new Promise((done) => {
    const child = spawn(process.execPath, [GW, ...args], { cwd: opts.cwd ?? emptyDir(), env: opts.env ?? cleanEnv() });
    const stray = setTimeout(() => child.kill('SIGKILL'), 45_000);
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    child.on('close', (code) => {
      clearTimeout(stray);
      done({ code, out, err });
    });
  });
}

export function configFile(text: string): string {
  const file = join(emptyDir(), 'config.yaml');
  writeFileSync(file, text);
  return file;
}

/** Start `gw serve`, resolve once it logs that it listens, with the port it bound. */
export function serve(
  args: string[],
  env: NodeJS.ProcessEnv = cleanEnv(),
  cwd = emptyDir(),
): Promise<{ child: ChildProcess; port: number; output: () => string }> {
  return new Promise((resolveStart, reject) => {
    const child = spawn(process.execPath, [GW, 'serve', ...args], { cwd, env });
    let out = '';
    child.stderr.on('data', (d) => (out += d));
    child.stdout.on('data', (d) => {
      out += d;
      // Complete lines only: under load a line can arrive in two chunks.
      const line = out
        .split('\n')
        .slice(0, -1)
        .find((l) => l.includes('"msg":"gateway listening"'));
      if (line) resolveStart({ child, port: JSON.parse(line).port, output: () => out });
    });
    child.on('exit', (code) => reject(new Error(`gw exited ${code}: ${out}`)));
  });
}

/** Stop a gateway `serve` started (SIGTERM: it drains and exits), once it has exited. */
export async function stopServing(child: ChildProcess | undefined): Promise<void> {
  if (!child || child.exitCode !== null) return;
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  await exited;
}
