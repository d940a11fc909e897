#!/usr/bin/env node
// The one entry point: gw serve | validate | demo | version. The TypeScript sources are built
// into dist/ by `npm install` / `npm ci` (the prepare script).
import { Command } from 'commander';
import { existsSync } from 'node:fs';

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
  const { Gateway } = await import(new URL('gateway.js', dist).href);
  const { ConfigError } = await import(new URL('../core/errors.js', dist).href);
  let gateway;
  try {
    gateway = await Gateway.create({ configFile: resolveConfigPath(opts.config), env: process.env, plugins: BUILTIN_PLUGINS });
    await gateway.listen();
  } catch (err) {
    if (err instanceof ConfigError) console.error(`gw: configuration error in ${err.message}`);
    else if (err?.code === 'EADDRINUSE') console.error(`gw: cannot listen: address in use (${err.address}:${err.port}); set server.port or GW_SERVER_PORT`);
    else console.error(`gw: failed to start: ${err?.stack ?? err}`);
    process.exit(1);
  }
  keepServing(gateway.runtime.log);
  let stopping = false;
  const stop = (signal) => {
    if (stopping) return;
    stopping = true;
    gateway.runtime.log.info({ signal }, 'shutting down: draining in-flight requests');
    gateway.close().then(() => process.exit(0), (err) => {
      console.error(`gw: error during shutdown: ${err?.message ?? err}`);
      process.exit(1);
    });
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
  // SIGHUP reloads the configuration, profiles, pipelines and plugins (as a file change does).
  process.on('SIGHUP', () => void gateway.requestReload('SIGHUP'));
}

async function validate(opts) {
  const { validate: run } = await import(new URL('validate.js', dist).href);
  process.exitCode = await run(resolveConfigPath(opts.config), process.env, (line) => console.log(line), BUILTIN_PLUGINS);
}

const program = new Command('gw')
  .description('Inference gateway: one HTTP service in front of many inference backends')
  .version(VERSION, '-v, --version', 'print the version')
  .option('-c, --config <file>', 'configuration file (else $GW_CONFIG, else ./config/config.yaml, else built-in default)')
  .option('--validate-config', 'check configuration, profiles, pipelines and plugins, then exit (same as `gw validate`)')
  .action(async (opts) => (opts.validateConfig ? validate(opts) : serve(opts)));

program.command('serve').description('run the gateway in the foreground')
  .option('-c, --config <file>', 'configuration file')
  .action((opts, cmd) => serve({ ...cmd.parent.opts(), ...opts }));
program.command('validate').description('check config, profiles, pipelines and plugins; print PASS/WARN/FAIL lines; exit 1 on any FAIL; never listens')
  .option('-c, --config <file>', 'configuration file')
  .action((opts, cmd) => validate({ ...cmd.parent.opts(), ...opts }));
program.command('demo').description('the gateway plus a simulated backend for every family, on free loopback ports')
  .option('-p, --port <n>', 'gateway port', '40114')
  .action(async (opts) => {
    const { startDemo } = await import(new URL('../demo/start.js', dist).href);
    const demo = await startDemo(Number(opts.port), BUILTIN_PLUGINS);
    keepServing(demo.gateway.runtime.log);
    const base = `http://localhost:${demo.gateway.port}`;
    console.error(`\ngw demo: ${demo.fakes.length} simulated backends behind ${base}\ntry:\n` +
      `  curl ${base}/gw/localrunner/api/tags\n` +
      `  curl ${base}/gw/pagedengine/v1/chat/completions -H 'content-type: application/json' -d '{"model":"pagedengine-model-1","messages":[{"role":"user","content":"hi"}],"stream":true}'\n` +
      `  curl ${base}/internal/health\n`);
    const stop = () => demo.stop().then(() => process.exit(0));
    process.on('SIGTERM', stop);
    process.on('SIGINT', stop);
  });
program.command('version').description('print the version').action(() => console.log(VERSION));

await program.parseAsync();
