// A real redis-server for the tests of what replicas share (Debian's package; .ci/run installs
// it): started on a free loopback port, keeping nothing on disk. Where there is none, the tests
// that need it are skipped, unless GW_REQUIRE_REDIS=1.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { freePort } from './llama-server.js';

const REDIS = 'redis-server';
export const haveRedis = spawnSync(REDIS, ['--version']).status === 0;
if (!haveRedis && process.env.GW_REQUIRE_REDIS === '1') throw new Error(`GW_REQUIRE_REDIS=1 but ${REDIS} is missing (apt-get install redis-server)`);

export class RedisServer {
  private child: ChildProcess | null = null;
  port = 0;

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  /** Start it (on the same port when started again); resolves once it accepts connections. */
  async start(): Promise<void> {
    this.port ||= await freePort();
    const child = spawn(REDIS, ['--port', String(this.port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    this.child = child;
    await new Promise<void>((resolve, reject) => {
      let out = '';
      child.stdout!.on('data', (d) => {
        out += d;
        if (out.includes('Ready to accept connections')) resolve();
      });
      child.once('exit', (code) => reject(new Error(`redis-server exited ${code}: ${out.slice(-500)}`)));
    });
  }

  async stop(): Promise<void> {
    const child = this.child;
    if (!child || child.exitCode !== null) return;
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGKILL');
    await exited;
  }
}
