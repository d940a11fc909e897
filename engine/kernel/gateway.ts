// The gateway process: build a graph from the configuration, serve it, rebuild it on a change
// (hot reload) and stop gracefully. The backends' state is made once and reconciled on every
// reload; the graph is swapped by one reference, so requests finish on the graph they began on.
import { readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join, resolve } from 'node:path';
import type { HTTPMethod } from 'find-my-way';
import type { DestinationStream, Logger } from 'pino';
import { Backends } from '../backends/state.js';
import { tracingSettings } from '../backends/tracing.js';
import type { WorkerLink } from '../backends/sharing/host-link.js';
import { compile, loadInputs, type BuildOptions, type Inputs } from './build.js';
import type { Graph } from './compile.js';
import { BUILTIN_DEFAULT, checkConfig, type GatewayConfig } from '../core/config.js';
import { parseDuration } from '../core/duration.js';
import { ConfigError, gwError, renderError } from '../core/errors.js';
import { clip } from '../core/head.js';
import { createLogger } from '../core/logger.js';
import { PACKAGE_ROOT } from '../core/paths.js';
import { formatProblem } from '../core/schema.js';
import { Reloader } from './reload.js';
import { unsafePath } from '../core/request-path.js';
import { GatewayResponse } from './response.js';
import { createRunner, type RouteRunner } from './run.js';
import { runtimeOf, type ReloadStatus, type Runtime } from './runtime.js';

export const VERSION: string = JSON.parse(readFileSync(join(PACKAGE_ROOT, 'package.json'), 'utf8')).version;

export interface GatewayOptions extends BuildOptions {
  /** Where logs go (tests pass an in-memory stream); stdout otherwise. */
  logDestination?: DestinationStream;
  /** The rate limits' clock (milliseconds, monotonic); tests move one by hand. */
  clock?: () => number;
  /** A worker of gw serve --workers N: its link to the host, which keeps the host-wide state and
   *  watches the files (it tells the worker when to reload). */
  link?: WorkerLink;
  /** Told after each reload that took effect (the host passes it on to its workers: one that
   *  failed leaves them on the configuration the host keeps too). */
  onReload?: (reason: string) => void;
}

/** A compiled graph and the runtime its plugins were applied with. */
interface Current {
  graph: Graph;
  runtime: Runtime;
}

export class Gateway {
  private server: Server | null = null;
  private reloader: Reloader | null = null;

  private constructor(
    private readonly options: GatewayOptions,
    readonly backends: Backends,
    private readonly log: Logger,
    private readonly runner: RouteRunner,
    private readonly status: ReloadStatus,
    private current: Current,
  ) {}

  static async create(options: GatewayOptions): Promise<Gateway> {
    const inputs = await loadInputs(options);
    const root = createLogger(inputs.config.logging.level, options.logDestination, inputs.config.logging.format);
    const log = options.link ? root.child({ worker: options.link.worker }) : root;
    for (const p of inputs.warnings) log.warn({ file: 'file' in p ? p.file : inputs.source, field: p.field }, formatProblem(p));
    const backends = new Backends(inputs.config, inputs.plans, log, options.clock, options.link);
    const status: ReloadStatus = { generation: 1, last_attempt: null, ok: true, error: null };
    const runner = createRunner(backends.stats);
    try {
      await backends.tracing.configure(tracingSettings(inputs.config), VERSION);
      const runtime = runtimeOf({ ...inputs, backends, log, version: VERSION, startedAt: new Date(), reload: status });
      const graph = compile(inputs, runtime, runner);
      return new Gateway(options, backends, log, runner, status, { graph, runtime });
    } catch (err) {
      await backends.stop();
      throw err;
    }
  }

  /** The runtime of the graph now serving (config, profiles, the backends' services). */
  get runtime(): Runtime {
    return this.current.runtime;
  }

  private readonly onRequest = (req: IncomingMessage, res: GatewayResponse) => {
    try {
      const url = req.url ?? '/';
      const q = url.indexOf('?');
      const path = q < 0 ? url : url.slice(0, q);
      const unsafe = unsafePath(path);
      if (unsafe) {
        this.backends.stats.refused.unsafePath++;
        renderError(res, gwError('UNSAFE_PATH', { path, reason: unsafe }));
        this.log.info({ method: req.method, path: clip(path), status: 400 }, 'request refused: unsafe path');
        return;
      }
      const found = this.current.graph.router.find(req.method as HTTPMethod, path);
      if (found === null) {
        this.backends.stats.refused.routeNotFound++;
        renderError(res, gwError('ROUTE_NOT_FOUND', { method: req.method, path }));
        // Status-route misses are worth seeing (spec: 4xx under /internal/ log at info).
        if (path.startsWith('/internal/')) this.log.info({ method: req.method, path: clip(path), status: 404 }, 'request');
        return;
      }
      found.handler(req, res, found.params, found.store, found.searchParams);
    } catch (err) {
      // A bug must cost one request, never the process.
      this.log.error({ err, method: req.method }, 'unexpected error while routing a request');
      if (!res.headersSent) renderError(res, gwError('INTERNAL_ERROR'));
      else res.destroy();
    }
  };

  /** First health round, then listen; then watch for changes. Resolves with the bound address. */
  async listen(): Promise<AddressInfo> {
    const { config, source } = this.runtime;
    await this.backends.start(this.runtime.config);
    const srv = config.server;
    const headerMs = parseDuration(srv.read_header_timeout);
    const server = createServer(
      {
        ServerResponse: GatewayResponse,
        maxHeaderSize: srv.request_limits.max_header_size,
        // A client has read_header_timeout to send its head, from the moment it connects (so a
        // connection that never sends a request is closed too); Node checks on this interval.
        headersTimeout: headerMs,
        connectionsCheckingInterval: Math.min(1_000, Math.max(50, Math.floor(headerMs / 4))),
        // The whole request (a body the gateway reads, or one Node drains after an early answer)
        // within read_timeout; read-body also cuts a body that pauses. Replies are not timed here.
        requestTimeout: parseDuration(srv.read_timeout),
      },
      this.onRequest as never,
    );
    this.applyServerSettings(server, config);
    // Expect: 100-continue is answered by read-body once the declared length is known to fit.
    server.on('checkContinue', this.onRequest);
    const stats = this.backends.stats;
    server.on('connection', (socket) => {
      stats.connectionsOpen++;
      stats.connectionsTotal++;
      socket.once('close', () => stats.connectionsOpen--);
    });
    this.server = server;
    await new Promise<void>((done, fail) => {
      server.once('error', fail);
      server.listen(srv.port, srv.host, () => {
        server.off('error', fail);
        done();
      });
    });
    const addr = server.address() as AddressInfo;
    this.log.info(
      { host: addr.address, port: addr.port, version: VERSION, config: source, endpoints: this.backends.endpoints.all.length },
      this.options.link ? 'worker listening' : 'gateway listening',
    );
    if (source === BUILTIN_DEFAULT && this.backends.endpoints.routableAll.length === 0) this.sayHowToConfigure();
    await this.watch();
    return addr;
  }

  /** Started with no config file, and nothing answers where the built-in default looks: say how
   *  to name one's own engines (a first run without Ollama). */
  private sayHowToConfigure(): void {
    const where = this.backends.endpoints.all.map((e) => `${e.name} (${e.family}) at ${e.url}`).join(', ');
    this.log.warn(
      { endpoints: where },
      `no config file, and nothing answers at the built-in default's endpoint (${where}): to use your own engines, copy config/config.example.yaml to config/config.yaml, give it an endpoint per backend (discovery.static.endpoints: name, type, url), and start again — or start the engine it expects`,
    );
  }

  /** The host of gw serve --workers N: the backends' state and the file watch, no server (its
   *  workers serve). */
  async host(): Promise<void> {
    await this.backends.start(this.runtime.config);
    await this.watch();
  }

  /** Reload on changes to the files (a worker's host watches them for it). */
  private async watch(): Promise<void> {
    this.reloader = new Reloader((reason) => this.reload(reason), this.log);
    await this.rewatch(this.runtime.config);
  }

  /** Reload as SIGHUP asks: one at a time, like the file watcher's. */
  requestReload(reason: string): Promise<void> {
    return this.reloader ? this.reloader.trigger(reason) : this.reload(reason).then(() => undefined);
  }

  /** Server settings a reload can change on the live server (the rest need a restart). */
  private applyServerSettings(server: Server, config: GatewayConfig): void {
    const srv = config.server;
    server.headersTimeout = parseDuration(srv.read_header_timeout);
    server.requestTimeout = parseDuration(srv.read_timeout);
    server.keepAliveTimeout = parseDuration(srv.idle_timeout);
  }

  /**
   * Build a new graph from the files as they are now. If anything fails, the graph serving now
   * keeps serving and the error is logged and shown on /internal/status; otherwise the backends'
   * state is reconciled and the new graph swapped in. Resolves with whether it took effect.
   */
  async reload(reason: string): Promise<boolean> {
    const ok = await this.rebuild(reason);
    if (ok) this.options.onReload?.(reason);
    return ok;
  }

  private async rebuild(reason: string): Promise<boolean> {
    this.status.last_attempt = new Date().toISOString();
    let inputs: Inputs;
    let next: Current;
    try {
      inputs = await loadInputs(this.options);
      await this.backends.tracing.configure(tracingSettings(inputs.config), VERSION);
      const runtime = runtimeOf({
        ...inputs,
        backends: this.backends,
        log: this.log,
        version: VERSION,
        startedAt: this.runtime.startedAt,
        reload: this.status,
      });
      next = { graph: compile(inputs, runtime, this.runner), runtime };
    } catch (err) {
      // Watch what the edited config names, even though it did not load: fixing a plugin it
      // added must trigger the next reload. Reported once that watch is in place.
      const { loaded } = checkConfig(this.options.configFile, this.options.env);
      if (loaded) await this.rewatch(loaded.config);
      this.failed(reason, err);
      return false;
    }
    try {
      const before = this.runtime.config.server;
      const after = inputs.config.server;
      if (before.host !== after.host || before.port !== after.port || before.request_limits.max_header_size !== after.request_limits.max_header_size) {
        this.log.warn(
          { host: before.host, port: before.port },
          'server.host, server.port and server.request_limits.max_header_size take effect at the next restart; still serving as before',
        );
      }
      if (this.runtime.config.logging.format !== inputs.config.logging.format) {
        this.log.warn({ format: this.runtime.config.logging.format }, 'logging.format takes effect at the next restart; still logging as before');
      }
      this.log.level = inputs.config.logging.level;
      for (const p of inputs.warnings) this.log.warn({ file: 'file' in p ? p.file : inputs.source, field: p.field }, formatProblem(p));
      // The backends first (the new routes may name new endpoints), then the one reference.
      const r = this.backends.reconcile(inputs.config, inputs.plans);
      if (this.server) this.applyServerSettings(this.server, inputs.config);
      this.current = next;
      this.status.generation++;
      this.status.ok = true;
      this.status.error = null;
      this.log.info(
        {
          reason,
          generation: this.status.generation,
          added: r.added.map((e) => e.name),
          removed: r.removed.map((e) => e.name),
          routes: next.graph.routes.length,
        },
        'configuration reloaded',
      );
    } catch (err) {
      this.failed(reason, err);
      return false;
    } finally {
      void this.rewatch(this.runtime.config);
    }
    return true;
  }

  private failed(reason: string, err: unknown): void {
    const e = err instanceof ConfigError ? err : new ConfigError('(reload)', '', (err as Error).message);
    this.status.ok = false;
    this.status.error = e.message;
    this.log.error(
      { reason, file: e.file, field: e.field || undefined, fix: e.fix || undefined, problem: e.problem },
      'reload failed; the configuration loaded before keeps serving',
    );
  }

  /** Watch what `config` names. A worker watches nothing: its host watches and tells it. */
  private rewatch(config: GatewayConfig): Promise<void> {
    if (!this.reloader || this.options.link) return Promise.resolve();
    if (config.pipelines.watch) return this.reloader.watch(watchTargets(this.options.configFile, config));
    this.reloader.unwatch();
    return Promise.resolve();
  }

  get port(): number {
    return (this.server?.address() as AddressInfo | null)?.port ?? 0;
  }

  /**
   * Stop accepting connections, let in-flight requests and streams finish for up to
   * `server.shutdown_timeout`, then cut what is left, stop health checks and close pools.
   */
  async close(): Promise<void> {
    const { config } = this.runtime;
    const stats = this.backends.stats;
    const server = this.server;
    stats.draining = true;
    await this.reloader?.close();
    if (server) {
      const closed = new Promise<void>((done) => server.close(() => done()));
      server.closeIdleConnections();
      const deadline = Date.now() + parseDuration(config.server.shutdown_timeout);
      while (stats.inFlight > 0 && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 25));
        server.closeIdleConnections();
      }
      if (stats.inFlight > 0) this.log.warn({ active: stats.inFlight }, 'shutdown timeout reached; closing remaining connections');
      server.closeAllConnections();
      await closed;
    }
    await this.backends.stop();
    this.log.info('gateway stopped');
  }
}

/** The files a reload reads: the config, the keys file, the custom profiles and pipelines,
 *  third-party plugin files and folders (an installed package is not watched: it changes with an install). */
function watchTargets(configFile: string | null, config: GatewayConfig): string[] {
  const plugins = config.plugins.filter((spec) => spec.startsWith('.') || spec.startsWith('/')).map((spec) => resolve(spec));
  const keys = config.auth.keys_file === undefined ? [] : [resolve(config.auth.keys_file)];
  return [...(configFile ? [configFile] : []), ...keys, resolve(config.proxy.profiles_dir), resolve(config.pipelines.dir), ...plugins];
}
