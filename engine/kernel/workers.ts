// gw serve --workers N: the host process (node:cluster's primary) runs the backends' state once
// (sharing/host-state.ts) and N workers serve the port (node:cluster hands them connections in turn; Node
// 20 has no reusePort). The host supervises: a worker that dies is logged and replaced (at once,
// then more slowly while workers keep dying); SIGTERM drains every worker, then stops the host;
// SIGHUP and file changes reload the host, which tells every worker to reload.
import cluster, { type Worker } from 'node:cluster';
import type { Logger } from 'pino';
import { HostState } from '../backends/sharing/host-state.js';
import { isGw, type ToHost } from '../backends/sharing/host-protocol.js';
import { parseDuration } from '../core/duration.js';
import type { Gateway } from './gateway.js';

/** Deaths this close together count as a crash loop: the next start waits longer (to 10 s). */
const LOOP_WINDOW_MS = 10_000;
const MAX_RESPAWN_DELAY_MS = 10_000;

export class Supervisor {
  /** The worker serving each slot (1..N); a replacement takes its slot's number. */
  private readonly slots = new Map<number, Worker>();
  private readonly host: HostState;
  private stopping = false;
  /** Every first worker listened: a worker that dies from now on is replaced (before, the start fails). */
  private started = false;
  private deaths: number[] = [];
  private readonly respawns = new Set<NodeJS.Timeout>();

  constructor(
    private readonly gateway: Gateway,
    readonly count: number,
    private readonly log: Logger,
  ) {
    this.host = new HostState(gateway.backends, log);
  }

  /** Fork every worker; resolves once all listen (with the address), rejects if one exits first. */
  async start(): Promise<{ port: number; address: string }> {
    const listening = [];
    for (let slot = 1; slot <= this.count; slot++) listening.push(this.fork(slot));
    const addresses = await Promise.all(listening);
    this.started = true;
    return addresses[0];
  }

  private fork(slot: number): Promise<{ port: number; address: string }> {
    const worker = cluster.fork({ GW_WORKER: String(slot) });
    this.slots.set(slot, worker);
    this.host.join({ id: worker.id, send: (m) => worker.send(m) });
    worker.on('message', (m: unknown) => {
      if (isGw(m)) this.host.receive(worker.id, m as ToHost);
    });
    worker.on('error', () => undefined); // a send to a worker that is exiting; its exit is handled below
    return new Promise((resolve, reject) => {
      let listened = false;
      worker.once('listening', (a) => {
        listened = true;
        resolve({ port: a.port, address: String(a.address ?? '') });
      });
      worker.once('exit', (code, signal) => {
        this.host.leave(worker.id);
        if (this.slots.get(slot) === worker) this.slots.delete(slot);
        if (!listened) reject(new Error(`worker ${slot} exited (${signal ?? `code ${code}`}) before it listened`));
        // A replacement that fails to start is replaced too, more slowly each time (a config the
        // host took and a new worker cannot read, say), until it starts or the host stops.
        if (this.stopping || !this.started) return;
        this.replace(slot, worker, code, signal);
      });
    });
  }

  private replace(slot: number, dead: Worker, code: number | null, signal: string | null): void {
    const now = Date.now();
    this.deaths = [...this.deaths.filter((t) => now - t < LOOP_WINDOW_MS), now];
    const delay = this.deaths.length <= 1 ? 0 : Math.min(MAX_RESPAWN_DELAY_MS, 100 * 2 ** (this.deaths.length - 2));
    this.log.error({ worker: slot, pid: dead.process.pid, code, signal, restart_in_ms: delay }, 'worker exited; starting another');
    // Not unref'd: a host whose workers all died stays up to start new ones.
    const timer = setTimeout(() => {
      this.respawns.delete(timer);
      if (this.stopping) return;
      this.fork(slot).then(
        () => this.log.info({ worker: slot }, 'worker replaced'),
        (err: Error) => this.stopping || this.log.error({ worker: slot, err: err.message }, 'replacement worker failed to start'),
      );
    }, delay);
    this.respawns.add(timer);
  }

  /** The host reloaded (a file change, SIGHUP): every worker reloads from the same files. */
  reload(reason: string): void {
    for (const w of this.slots.values()) if (w.isConnected()) w.send({ gw: 'reload', reason });
  }

  /** Drain every worker (each waits for its requests up to shutdown_timeout), then stop the host. */
  async stop(): Promise<void> {
    this.stopping = true;
    for (const t of this.respawns) clearTimeout(t);
    const waitMs = parseDuration(this.gateway.runtime.config.server.shutdown_timeout) + 5_000;
    const exits = [...this.slots.values()].map(
      (w) =>
        new Promise<void>((done) => {
          if (w.isDead()) return done();
          w.once('exit', () => done());
          w.process.kill('SIGTERM');
        }),
    );
    const late = setTimeout(() => {
      for (const w of this.slots.values()) if (!w.isDead()) w.process.kill('SIGKILL');
    }, waitMs);
    await Promise.all(exits);
    clearTimeout(late);
    await this.gateway.close();
  }

  /** Worker pids by slot (status, tests). */
  get pids(): Record<number, number | undefined> {
    return Object.fromEntries([...this.slots].map(([slot, w]) => [slot, w.process.pid]));
  }
}
