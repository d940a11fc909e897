// The gateway process: load config, profiles, endpoints, plugins and pipelines; compile the graph;
// serve; stop gracefully. Everything that can be wrong in the configuration fails before listening.
import { readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import type { HTTPMethod } from 'find-my-way';
import type { DestinationStream } from 'pino';
import { BUILTIN_PLUGINS } from '../plugins/index.js';
import { compileGraph, type Graph } from './compile.js';
import { loadConfig } from './config.js';
import { parseDuration } from './duration.js';
import { planEndpoints } from './endpoints.js';
import { ConfigError, gwError, renderError } from './errors.js';
import { clip } from './head.js';
import { createLogger } from './logger.js';
import { PACKAGE_ROOT } from './paths.js';
import { checkPipelines } from './pipelines.js';
import { PluginRegistry } from './plugin.js';
import { loadProfiles } from './profiles.js';
import { unsafePath } from './request-path.js';
import { createRunner } from './run.js';
import { createRuntime, type Runtime } from './runtime.js';
import { formatProblem } from './schema.js';

export const VERSION: string = JSON.parse(readFileSync(join(PACKAGE_ROOT, 'package.json'), 'utf8')).version;

export interface GatewayOptions {
  /** Resolved config file, or null for the built-in default. */
  configFile: string | null;
  env?: NodeJS.ProcessEnv;
  /** Where logs go (tests pass an in-memory stream); stdout otherwise. */
  logDestination?: DestinationStream;
}

export class Gateway {
  private graph: Graph;
  private server: Server | null = null;

  private constructor(readonly runtime: Runtime, readonly plugins: PluginRegistry, graph: Graph) {
    this.graph = graph;
  }

  static async create(opts: GatewayOptions): Promise<Gateway> {
    const env = opts.env ?? process.env;
    const { config, source, problems } = loadConfig(opts.configFile, env);
    const log = createLogger(config.logging.level, opts.logDestination);
    for (const p of problems) log.warn({ file: source, field: p.field }, formatProblem(p));
    const profiles = loadProfiles(config.proxy.profiles_dir);
    const { plans, problems: endpointProblems } = planEndpoints(config, profiles, source);
    if (endpointProblems.length) {
      const p = endpointProblems[0];
      throw new ConfigError(source, p.field, p.message, p.fix);
    }
    const plugins = new PluginRegistry(BUILTIN_PLUGINS);
    const loaded = await plugins.loadThirdParty(config.plugins);
    loaded.forEach((r, i) => {
      if (r.error) throw new ConfigError(source, `plugins[${i}]`, `plugin ${r.spec}: ${r.error}`, 'fix the plugin or remove it from plugins:');
    });
    const { pipelines, files } = checkPipelines(config.pipelines.dir);
    for (const f of files) {
      const fail = f.problems.find((p) => p.level === 'fail');
      if (fail) throw new ConfigError(f.file, fail.field, fail.message, fail.fix);
    }
    const runtime = createRuntime({ config, source, profiles, plans, log, version: VERSION });
    const { graph, problems: compileProblems } = compileGraph(pipelines, plugins, runtime, createRunner(runtime));
    if (!graph) {
      const bad = compileProblems.find((c) => c.problems.some((p) => p.level === 'fail'))!;
      const fail = bad.problems.find((p) => p.level === 'fail')!;
      await runtime.endpoints.close();
      throw new ConfigError(bad.file, fail.field, fail.message, fail.fix);
    }
    return new Gateway(runtime, plugins, graph);
  }

  /** Swap in a new compiled graph; requests already running keep the one they started on. */
  swap(graph: Graph): void {
    this.graph = graph;
  }

  routes(): Graph['routes'] {
    return this.graph.routes;
  }

  private readonly onRequest = (req: IncomingMessage, res: ServerResponse) => {
    try {
      const url = req.url ?? '/';
      const q = url.indexOf('?');
      const path = q < 0 ? url : url.slice(0, q);
      const unsafe = unsafePath(path);
      if (unsafe) {
        renderError(res, gwError('UNSAFE_PATH', { path, reason: unsafe }));
        this.runtime.log.info({ method: req.method, path: clip(path), status: 400 }, 'request refused: unsafe path');
        return;
      }
      const found = this.graph.router.find(req.method as HTTPMethod, path);
      if (found === null) {
        renderError(res, gwError('ROUTE_NOT_FOUND', { method: req.method, path }));
        // Status-route misses are worth seeing (spec: 4xx under /internal/ log at info).
        if (path.startsWith('/internal/')) this.runtime.log.info({ method: req.method, path: clip(path), status: 404 }, 'request');
        return;
      }
      found.handler(req, res, found.params, found.store, found.searchParams);
    } catch (err) {
      // A bug must cost one request, never the process.
      this.runtime.log.error({ err, method: req.method }, 'unexpected error while routing a request');
      if (!res.headersSent) renderError(res, gwError('INTERNAL_ERROR'));
      else res.destroy();
    }
  };

  /** First health round, then listen. Resolves with the bound address. */
  async listen(): Promise<AddressInfo> {
    const { config, health, discovery, log } = this.runtime;
    await health.start();
    await discovery.start();
    const srv = config.server;
    const headerMs = parseDuration(srv.read_header_timeout);
    const server = createServer({
      maxHeaderSize: srv.request_limits.max_header_size,
      // A client has read_header_timeout to send its head, from the moment it connects (so a
      // connection that never sends a request is closed too); Node checks on this interval.
      headersTimeout: headerMs,
      connectionsCheckingInterval: Math.min(1_000, Math.max(50, Math.floor(headerMs / 4))),
      // The whole request (a body the gateway reads, or one Node drains after an early answer)
      // within read_timeout; read-body also cuts a body that pauses. Replies are not timed here.
      requestTimeout: parseDuration(srv.read_timeout),
    }, this.onRequest);
    server.keepAliveTimeout = parseDuration(srv.idle_timeout);
    // Expect: 100-continue is answered by read-body once the declared length is known to fit.
    server.on('checkContinue', this.onRequest);
    const stats = this.runtime.stats;
    stats.observeGc();
    server.on('connection', (socket) => {
      stats.connectionsOpen++;
      stats.connectionsTotal++;
      socket.once('close', () => stats.connectionsOpen--);
    });
    this.server = server;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(config.server.port, config.server.host, () => {
        server.off('error', reject);
        resolve();
      });
    });
    const addr = server.address() as AddressInfo;
    log.info({ host: addr.address, port: addr.port, version: VERSION, config: this.runtime.source, endpoints: this.runtime.endpoints.all.length }, 'gateway listening');
    return addr;
  }

  get port(): number {
    return (this.server?.address() as AddressInfo | null)?.port ?? 0;
  }

  /**
   * Stop accepting connections, let in-flight requests and streams finish for up to
   * `server.shutdown_timeout`, then cut what is left, stop health checks and close pools.
   */
  async close(): Promise<void> {
    const { config, stats, health, discovery, endpoints, log } = this.runtime;
    const server = this.server;
    await health.stop();
    await discovery.stop();
    if (server) {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeIdleConnections();
      const deadline = Date.now() + parseDuration(config.server.shutdown_timeout);
      while (stats.inFlight > 0 && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 25));
        server.closeIdleConnections();
      }
      if (stats.inFlight > 0) log.warn({ active: stats.inFlight }, 'shutdown timeout reached; closing remaining connections');
      server.closeAllConnections();
      await closed;
    }
    stats.stopObserving();
    await endpoints.close();
    log.info('gateway stopped');
  }
}
