#!/usr/bin/env node
// The one entry point: gw serve | validate | demo | version. The TypeScript sources are built
// into dist/ by `npm install` / `npm ci` (the prepare script).
import { Command, InvalidArgumentError } from 'commander';
import { existsSync } from 'node:fs';
import cluster from 'node:cluster';

const dist = new URL('../dist/engine/kernel/', import.meta.url);
if (!existsSync(dist)) {
  console.error('gw: dist/ is missing; run `npm install` (or `npm run build`) in the gateway directory first');
  process.exit(1);
}
const { resolveConfigPath } = await import(new URL('../core/config.js', dist).href);
const { VERSION } = await import(new URL('gateway.js', dist).href);
// The built-in plugins, handed to the engine (which does not import them itself).
const { BUILTIN_PLUGINS } = await import(new URL('../../plugins/index.js', dist).href);

/** Requests contain their own errors (a request that fails gets a 500); this is the last line of
 *  defence, so that whatever escapes them costs one request and never the process. */
function keepServing(log) {
  process.on('unhandledRejection', (err) => log.error({ err }, 'unhandled rejection; the gateway keeps serving'));
  process.on('uncaughtException', (err) => log.error({ err }, 'uncaught exception; the gateway keeps serving'));
}

async function serve(opts) {
  if (cluster.isWorker) return serveWorker(opts);
  const { Gateway } = await import(new URL('gateway.js', dist).href);
  // --workers beats server.workers and GW_SERVER_WORKERS (checked as the variable is).
  if (opts.workers !== undefined) process.env.GW_SERVER_WORKERS = opts.workers;
  let gateway;
  let supervisor = null;
  try {
    gateway = await Gateway.create({
      configFile: resolveConfigPath(opts.config),
      env: process.env,
      plugins: BUILTIN_PLUGINS,
      onReload: (reason) => supervisor?.reload(reason),
    });
  } catch (err) {
    failedToStart(err, await import(new URL('../core/errors.js', dist).href));
  }
  // Set before listening: the port serves (and says so) while the file watch is still starting,
  // and a signal then must drain and exit, not kill the process under the requests it holds.
  keepServing(gateway.runtime.log);
  onStop(gateway.runtime.log, () => (supervisor ? supervisor.stop() : gateway.close()));
  // SIGHUP reloads the configuration, profiles, pipelines and plugins (as a file change does);
  // with workers, the host reloads and then every worker.
  process.on('SIGHUP', () => void gateway.requestReload('SIGHUP'));
  try {
    const { availableCores } = await import(new URL('../core/cores.js', dist).href);
    const setting = gateway.runtime.config.server.workers;
    const workers = setting === 'auto' ? availableCores() : setting;
    if (workers > 1) {
      const { Supervisor } = await import(new URL('workers.js', dist).href);
      supervisor = new Supervisor(gateway, workers, gateway.runtime.log);
      await gateway.host();
      const addr = await supervisor.start();
      gateway.runtime.log.info({ host: addr.address, port: addr.port, workers, version: VERSION }, 'gateway listening');
    } else await gateway.listen();
  } catch (err) {
    failedToStart(err, await import(new URL('../core/errors.js', dist).href));
  }
}

/** One worker of gw serve --workers N: it serves, and its host keeps the host-wide state. */
async function serveWorker(opts) {
  const { Gateway } = await import(new URL('gateway.js', dist).href);
  const { WorkerLink } = await import(new URL('../backends/sharing/host-link.js', dist).href);
  const { isGw } = await import(new URL('../backends/sharing/host-protocol.js', dist).href);
  const link = new WorkerLink((m) => process.connected && process.send(m), Number(process.env.GW_WORKER));
  let gateway = null;
  let stop = null;
  // A reload the host asked for while this worker was still starting runs once it has started.
  let reloadWhenStarted = null;
  process.on('message', (m) => {
    if (!isGw(m)) return;
    if (m.gw !== 'reload') link.receive(m);
    else if (gateway) void gateway.requestReload(m.reason);
    else reloadWhenStarted = m.reason;
  });
  // The host reloads every worker (a SIGHUP sent to the whole process group is the host's to act on).
  process.on('SIGHUP', () => undefined);
  // The host is gone: nothing keeps this worker's state, so it drains and stops too. (Node's
  // cluster code would exit at once on the disconnect; told the worker expects it, it lets us drain.)
  cluster.worker.exitedAfterDisconnect = true;
  process.on('disconnect', () => {
    link.hostGone();
    if (stop) stop('host gone');
    else process.exit(0);
  });
  try {
    gateway = await Gateway.create({ configFile: resolveConfigPath(opts.config), env: process.env, plugins: BUILTIN_PLUGINS, link });
  } catch (err) {
    failedToStart(err, await import(new URL('../core/errors.js', dist).href));
  }
  // Set before listening, as in serve(): a signal once the port serves drains and exits.
  keepServing(gateway.runtime.log);
  stop = onStop(gateway.runtime.log, () => gateway.close());
  try {
    await gateway.listen();
  } catch (err) {
    failedToStart(err, await import(new URL('../core/errors.js', dist).href));
  }
  if (reloadWhenStarted) void gateway.requestReload(reloadWhenStarted);
}

function failedToStart(err, { ConfigError }) {
  if (err instanceof ConfigError) console.error(`gw: configuration error in ${err.message}`);
  else if (err?.code === 'EADDRINUSE') console.error(`gw: cannot listen: address in use (${err.address}:${err.port}); set server.port or GW_SERVER_PORT`);
  else console.error(`gw: failed to start: ${err?.stack ?? err}`);
  process.exit(1);
}

/** SIGTERM and SIGINT drain in-flight requests (up to server.shutdown_timeout), then exit. */
function onStop(log, close) {
  let stopping = false;
  const stop = (signal) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'shutting down: draining in-flight requests');
    close().then(
      () => process.exit(0),
      (err) => {
        console.error(`gw: error during shutdown: ${err?.message ?? err}`);
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
  return stop;
}

async function validate(opts) {
  const { validate: run } = await import(new URL('validate.js', dist).href);
  process.exitCode = await run(resolveConfigPath(opts.config), process.env, (line) => console.log(line), BUILTIN_PLUGINS);
}

function workersArg(v) {
  if (v === 'auto' || (/^\d+$/.test(v) && +v >= 1 && +v <= 256)) return v;
  throw new InvalidArgumentError('must be a number 1-256 or auto');
}

const program = new Command('gw')
  .description('Inference gateway: one HTTP service in front of many inference backends')
  .version(VERSION, '-v, --version', 'print the version')
  .option('-c, --config <file>', 'configuration file (else $GW_CONFIG, else ./config/config.yaml, else built-in default)')
  .option('--validate-config', 'check configuration, profiles, pipelines and plugins, then exit (same as `gw validate`)')
  .action(async (opts) => (opts.validateConfig ? validate(opts) : serve(opts)));

program
  .command('serve')
  .description('run the gateway in the foreground')
  .option('-c, --config <file>', 'configuration file')
  .option('-w, --workers <n>', 'processes serving the port: a number, or auto for the cores available (default: server.workers, 1)', workersArg)
  .action((opts, cmd) => serve({ ...cmd.parent.opts(), ...opts }));
program
  .command('validate')
  .description('check config, profiles, pipelines and plugins; print PASS/WARN/FAIL lines; exit 1 on any FAIL; never listens')
  .option('-c, --config <file>', 'configuration file')
  .action((opts, cmd) => validate({ ...cmd.parent.opts(), ...opts }));
program
  .command('demo')
  .description('the gateway plus a simulated backend for every family, on free loopback ports')
  .option('-p, --port <n>', 'gateway port', '40114')
  .option('--switch-time <duration>', "the one-GPU simulator's time to switch models", '5s')
  .action(async (opts) => {
    const { startDemo } = await import(new URL('../demo/start.js', dist).href);
    const { parseDuration, DURATION } = await import(new URL('../core/duration.js', dist).href);
    if (!DURATION.test(opts.switchTime)) {
      console.error(`gw demo: --switch-time ${opts.switchTime}: a duration such as 5s or 800ms`);
      process.exit(1);
    }
    let demo;
    try {
      demo = await startDemo(Number(opts.port), BUILTIN_PLUGINS, 'localhost', parseDuration(opts.switchTime));
    } catch (err) {
      if (err?.code !== 'EADDRINUSE') failedToStart(err, await import(new URL('../core/errors.js', dist).href));
      console.error(
        `gw demo: cannot listen: address in use (${err.address}:${err.port}): a gateway or another gw demo runs there; stop it, or choose a port: gw demo --port N`,
      );
      process.exit(1);
    }
    keepServing(demo.gateway.runtime.log);
    const base = `http://localhost:${demo.gateway.port}`;
    console.error(
      `\ngw demo: ${demo.fakes.length} simulated backends behind ${base}\ntry:\n` +
        `  curl ${base}/gw/localrunner/api/tags\n` +
        `  curl ${base}/gw/pagedengine/v1/chat/completions -H 'content-type: application/json' -d '{"model":"pagedengine-model-1","messages":[{"role":"user","content":"hi"}],"stream":true}'\n` +
        `  curl ${base}/internal/health\n` +
        `one GPU, two models (planner, coder), ${opts.switchTime} to switch, served by model:\n` +
        `  curl ${base}/gw/ollama/api/chat -d '{"model":"coder","messages":[{"role":"user","content":"hi"}],"stream":false}'\n` +
        `  curl ${base}/internal/status/endpoints   # queue.model_switching of demo-one-gpu\n`,
    );
    const stop = () => demo.stop().then(() => process.exit(0));
    process.on('SIGTERM', stop);
    process.on('SIGINT', stop);
  });
const keys = program.command('keys').description("API keys (the config's auth:)");
keys
  .command('new')
  .argument('<name>', "the key's name: what logs, metrics and usage show")
  .description('print a fresh random key once, with the auth.keys entry that holds its hash (the gateway never stores the key)')
  .action(async (name) => {
    const { NAME_PATTERN, keyHash, newKey } = await import(new URL('../core/keys.js', dist).href);
    if (!NAME_PATTERN.test(name)) {
      console.error(`gw keys new: ${JSON.stringify(name)} is not a key name: letters, digits, '.', '_' and '-', at most 64, starting with a letter or digit`);
      process.exit(2);
    }
    const key = newKey();
    console.log(`# The key for ${name}: give it to whoever uses it; it is shown only now.`);
    console.log(key);
    console.log('# Its entry, for auth.keys in the config or a list in auth.keys_file:');
    console.log(`- { name: ${name}, hash: "${keyHash(key)}" }`);
  });
program
  .command('version')
  .description('print the version')
  .action(() => console.log(VERSION));

await program.parseAsync();
