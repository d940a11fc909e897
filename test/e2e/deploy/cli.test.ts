// The command line as users and scripts run it: bin/gw.js from the built package.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { once } from 'node:events';
import { createServer, request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { waitFor } from '../../helpers/wait.js';
import { cleanEnv, configFile, emptyDir, GW, run, serve } from '../../helpers/cli.js';
import { FakeBackend } from '../../../engine/demo/index.js';

let children: ChildProcess[] = [];
afterEach(() => {
  for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
  children = [];
});

describe('gw validate', () => {
  it('passes the built-in default and exits 0 without listening', async () => {
    const r = await run(['validate']);
    expect(r.code).toBe(0);
    expect(r.out).toMatch(/^PASS config \(built-in default\): valid$/m);
    expect(r.out).toMatch(/^PASS profile localrunner /m);
    expect(r.out).toMatch(/^PASS pipeline proxy \(.*\): \d+ routes$/m);
    expect(r.out).toMatch(/^summary: \d+ passed, 0 warnings, 0 failed$/m);
  });

  it('fails a typo with the file, the field and the fix, exit 1', async () => {
    const file = configFile('server:\n  prot: 8080\n');
    const r = await run(['validate', '--config', file]);
    expect(r.code).toBe(1);
    expect(r.out).toContain(`FAIL config ${file}: server.prot: unknown key "prot" — fix: did you mean "port"? rename it to server.port`);
  });

  it("fails an unknown family through --validate-config with the one it most likely meant, exit 1; an engine's name is a type", async () => {
    const file = configFile('discovery:\n  static:\n    endpoints:\n      - { name: x, type: localruner, url: "http://127.0.0.1:1" }\n');
    const r = await run(['--validate-config', '--config', file]);
    expect(r.code).toBe(1);
    expect(r.out).toContain(
      'FAIL endpoints in ' +
        file +
        ': discovery.static.endpoints[0].type: unknown backend family "localruner" for endpoint "x" — fix: did you mean "localrunner" (Ollama)? write type: localrunner',
    );
    const ollama = await run([
      'validate',
      '--config',
      configFile('discovery:\n  static:\n    endpoints:\n      - { name: x, type: ollama, url: "http://127.0.0.1:1" }\n'),
    ]);
    expect(ollama.code).toBe(0);
    expect(ollama.out).toMatch(/^PASS endpoints in .*: 1 endpoint \(x: localrunner\)$/m);
  });

  it('fails a top-level endpoints list, naming where it belongs', async () => {
    const file = configFile('endpoints:\n  - { name: x, type: cppengine, url: "http://127.0.0.1:1" }\n');
    const r = await run(['validate', '--config', file]);
    expect(r.code).toBe(1);
    expect(r.out).toContain(`FAIL config ${file}: endpoints: unknown key "endpoints" at the top level — fix: did you mean discovery.static.endpoints?`);
  });

  it('a config file that is not there: says to create it from the example, exit 1 (validate and serve)', async () => {
    const file = join(emptyDir(), 'config', 'config.yaml');
    const fix = `no such file — fix: create it: copy config/config.example.yaml to ${file} and give it your endpoints, or name another file with --config`;
    const v = await run(['validate', '--config', file]);
    expect([v.code, v.out]).toEqual([1, expect.stringContaining(`FAIL config ${file}: ${fix}`)]);
    const s = await run(['serve', '--config', file]);
    expect(s.code).toBe(1);
    expect(s.err).toContain(`configuration error in ${file}: no such file\n  fix: create it: copy config/config.example.yaml to ${file}`);
  });

  it('a value of the wrong type says what to write: a list where a mapping goes, a port that is not a number', async () => {
    const list = configFile('discovery:\n  static:\n    - { name: x, type: cppengine, url: "http://127.0.0.1:1" }\n');
    expect((await run(['validate', '--config', list])).out).toContain(
      'discovery.static: must be object, got an array — fix: put the list under discovery.static.endpoints (a key, then the list under it)',
    );
    const port = await run(['validate', '--config', configFile('server:\n  port: abc\n')]);
    expect(port.out).toContain('server.port: must be integer, got "abc" — fix: write a whole number, such as 40114 (the default)');
    const quoted = await run(['validate', '--config', configFile('server:\n  port: "8080"\n')]);
    expect(quoted.out).toContain('fix: write the number without quotes: 8080');
  });

  it('warns about an unknown key but passes', async () => {
    const r = await run(['validate', '--config', configFile('colour: blue\n')]);
    expect(r.code).toBe(0);
    expect(r.out).toMatch(/^WARN config .*: colour: unknown key "colour" is ignored/m);
  });

  it('reads GW_CONFIG', async () => {
    const r = await run(['validate'], { env: { ...cleanEnv(), GW_CONFIG: configFile('proxy: { load_balancer: nope }\n') } });
    expect(r.code).toBe(1);
    expect(r.out).toContain('proxy.load_balancer: value "nope" is not allowed');
  });
});

describe('gw version and help', () => {
  it('prints the version both ways', async () => {
    const version = JSON.parse((await import('node:fs')).readFileSync('package.json', 'utf8')).version;
    expect((await run(['version'])).out.trim()).toBe(version);
    expect((await run(['--version'])).out.trim()).toBe(version);
  });

  it('prints usage', async () => {
    const r = await run(['--help']);
    expect(r.out).toContain('serve');
    expect(r.out).toContain('validate');
  });
});

/** Resolve with the first output line matching `pattern` (a readiness signal), or reject if the process exits first. */
function waitForLine(child: ChildProcess, pattern: RegExp, budgetMs = 60_000): Promise<RegExpMatchArray> {
  return new Promise((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error(`no line matching ${pattern} within ${budgetMs} ms: ${out}`)), budgetMs);
    const onData = (d: Buffer) => {
      out += d;
      // Complete lines only: under load a line (and the port in it) can arrive in two chunks.
      const m = out.slice(0, out.lastIndexOf('\n') + 1).match(pattern);
      if (m) {
        clearTimeout(timer);
        resolve(m);
      }
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', onData);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`exited ${code} before ${pattern}: ${out}`));
    });
  });
}

describe('gw demo', () => {
  it('serves every family from simulated backends', async () => {
    const child = spawn(process.execPath, [GW, 'demo', '--port', '0'], { cwd: emptyDir(), env: cleanEnv() });
    children.push(child);
    // The demo prints where it listens once it does: that line is the readiness signal.
    const [, port] = await waitForLine(child, /behind http:\/\/localhost:(\d+)/);
    const health = (await (await request(`http://localhost:${port}/internal/health`)).body.json()) as any;
    expect(health.status).toBe('healthy');
    expect(health.endpoints).toHaveLength(14); // one per family, auto included, and the one-GPU Ollama
    const res = await request(`http://localhost:${port}/gw/turboengine/generate`, { method: 'POST', body: '{"inputs":"hi"}' });
    expect(((await res.body.json()) as any).generated_text).toContain('turboengine');
    const exited = new Promise((r) => child.on('exit', r));
    child.kill('SIGTERM');
    expect(await exited).toBe(0);
  });

  it('on a port in use (a demo already running, say): says so and how to choose another, exit 1, no stack trace', async () => {
    const busy = createServer().listen(0, 'localhost');
    await once(busy, 'listening');
    const { port } = busy.address() as AddressInfo;
    try {
      const r = await run(['demo', '--port', String(port)]);
      expect(r.code).toBe(1);
      expect(r.err).toContain(`gw demo: cannot listen: address in use (`);
      expect(r.err).toContain(`:${port}): a gateway or another gw demo runs there; stop it, or choose a port: gw demo --port N`);
      expect(r.err).not.toContain('    at ');
    } finally {
      busy.close();
    }
  });
});

describe('gw serve --workers', () => {
  it('refuses a count it cannot use, naming the option', async () => {
    for (const bad of ['0', '257', 'many']) {
      const r = await run(['serve', '--workers', bad]);
      expect(r.code).toBe(1);
      expect(r.err).toContain(`option '-w, --workers <n>' argument '${bad}' is invalid. must be a number 1-256 or auto`);
    }
  });
});

describe('gw serve', () => {
  it('refuses to start on a URL with credentials, without echoing them', async () => {
    const file = configFile('discovery:\n  static:\n    endpoints:\n      - { name: gpu, type: pagedengine, url: "http://admin:hunter2@127.0.0.1:1" }\n');
    const r = await run(['serve', '--config', file]);
    expect(r.code).toBe(1);
    expect(r.err).toContain('discovery.static.endpoints[0].url');
    expect(r.err).toContain('auth: { type: basic');
    expect(r.out + r.err).not.toContain('hunter2');
  });

  it('refuses to start on a top-level endpoints list instead of serving the built-in default endpoint', async () => {
    const file = configFile('endpoints:\n  - { name: x, type: cppengine, url: "http://127.0.0.1:1" }\n');
    const r = await run(['serve', '--config', file]);
    expect(r.code).toBe(1);
    expect(r.err).toContain('did you mean discovery.static.endpoints?');
  });

  it('listens on 40114 with the built-in default (npm start)', async () => {
    // The port is the machine's, not the test's: another program (another suite, another CI job)
    // may hold it for as long as it likes. Either outcome shows the default: it serves on 40114,
    // or it refuses with the address it could not take and the setting that changes it.
    const started = await serve([]).catch((err: Error) => err);
    if (started instanceof Error) {
      expect(started.message).toContain('gw: cannot listen: address in use');
      expect(started.message).toContain(':40114)');
      expect(started.message).toContain('GW_SERVER_PORT');
      return;
    }
    const { child, port, output } = started;
    children.push(child);
    expect(port).toBe(40114);
    const res = await request('http://localhost:40114/internal/health');
    expect(res.statusCode).toBe(200);
    expect(((await res.body.json()) as any).endpoints[0].name).toBe('local-runner');
    const exited = new Promise((r) => child.on('exit', r));
    child.kill('SIGTERM');
    expect(await exited, output()).toBe(0);
  });

  it('with no config file and nothing answering at the built-in default, says how to name your own engines', async () => {
    const { child, port, output } = await serve([], { ...cleanEnv(), GW_SERVER_PORT: '0' });
    children.push(child);
    const status = (await (await request(`http://127.0.0.1:${port}/internal/status/endpoints`)).body.json()) as any;
    const said = () => output().includes('copy config/config.example.yaml to config/config.yaml');
    // Logged right after 'gateway listening' (its own line may come in a later chunk): waited for.
    if (status.endpoints[0].routable !== true) await waitFor(() => said() || undefined, 'the line that says how to configure');
    // Where an Ollama does answer on this machine, nothing needs saying.
    else expect(said()).toBe(false);
  });

  it('drains and exits 0 on a SIGTERM that comes as soon as it listens, while its file watch is still starting', async () => {
    // A plugin folder of many files: the watch of what a reload reads takes a while to be ready,
    // and the port serves (and says so) meanwhile.
    const dir = emptyDir();
    const plugin = join(dir, 'plugin');
    mkdirSync(join(plugin, 'many'), { recursive: true });
    writeFileSync(join(plugin, 'index.js'), "export default { name: 'noop-step', schema: { type: 'object' }, apply() {} };\n");
    writeFileSync(join(plugin, 'package.json'), '{ "type": "module", "main": "index.js" }');
    for (let i = 0; i < 3000; i++) writeFileSync(join(plugin, 'many', `f${i}.txt`), '');
    const file = join(dir, 'config.yaml');
    writeFileSync(file, `server: { host: 127.0.0.1, port: 0 }\nplugins: [${plugin}]\n`);
    const { child } = await serve(['--config', file]);
    children.push(child);
    const exited = new Promise((r) => child.on('exit', (code, signal) => r(signal ?? code)));
    child.kill('SIGTERM');
    expect(await exited).toBe(0);
  });

  it('lets a live stream finish on SIGTERM, then exits 0', async () => {
    const fake = await new FakeBackend({ family: 'localrunner', reply: 'a b c d e f g h' }).start();
    fake.behaviour.chunkDelayMs = 100;
    const file = configFile(
      `server: { host: 127.0.0.1, port: 0 }\ndiscovery:\n  static:\n    endpoints:\n      - { name: l, type: localrunner, url: "${fake.url}" }\n`,
    );
    const { child, port } = await serve(['--config', file]);
    children.push(child);
    // SIGTERM once the first chunk arrived: the stream is in flight for certain.
    let firstChunk!: () => void;
    const started = new Promise<void>((r) => (firstChunk = r));
    const stream = new Promise<{ lines: string[]; error?: Error }>((resolve) => {
      const req = httpRequest({ hostname: '127.0.0.1', port, path: '/gw/localrunner/api/chat', method: 'POST', agent: false }, (res) => {
        let text = '';
        res.on('data', (d) => {
          text += d;
          firstChunk();
        });
        res.on('end', () => resolve({ lines: text.trim().split('\n') }));
        res.on('error', (error) => resolve({ lines: [], error }));
      });
      req.on('error', (error) => resolve({ lines: [], error }));
      req.end('{"model":"test-model","messages":[]}');
    });
    await started;
    const exited = new Promise((r) => child.on('exit', r));
    child.kill('SIGTERM');
    const r = await stream;
    expect(r.error).toBeUndefined();
    expect(JSON.parse(r.lines.at(-1)!).done).toBe(true);
    expect(await exited).toBe(0);
    await fake.stop();
  });

  it('never prints a secret held in a mistyped value, in validate or in serve', async () => {
    const file = configFile(
      'discovery:\n  static:\n    endpoints:\n      - name: gpu\n        type: pagedengine\n        url: "http://127.0.0.1:1"\n        headers: { Authorization: { nested: "Bearer tok-SECRET-4711" } }\n',
    );
    const validated = await run(['validate', '--config', file]);
    expect(validated.code).toBe(1);
    expect(validated.out).toContain('discovery.static.endpoints[0].headers.Authorization: must be string, got an object (value not shown: it may be a secret)');
    const served = await run(['serve', '--config', file]);
    expect(served.code).toBe(1);
    expect(served.err).toContain('headers.Authorization');
    for (const text of [validated.out, validated.err, served.out, served.err]) expect(text).not.toContain('SECRET');
  });

  it('warns about a custom profiles folder that does not exist, naming it', async () => {
    const dir = emptyDir();
    const r = await run(['validate', '--config', configFile('proxy: { profiles_dir: ./my-profiles }\n')], { cwd: dir });
    expect(r.code).toBe(0);
    expect(r.out).toContain(`WARN config`);
    expect(r.out).toContain(`proxy.profiles_dir: folder ${join(dir, 'my-profiles')} does not exist; no custom profiles are loaded`);
  });

  it('shows profile fields it refuses, naming the file, the field and the range; and the ones it only notes', async () => {
    const dir = emptyDir();
    writeFileSync(
      join(dir, 'mine.yaml'),
      'name: mine\nversion: "1.0"\nrouting: { prefixes: [mine] }\napi: { paths: [/a, /b] }\npath_indices: { chat: 2 }\nmodels: { name_format: "{{.Id}}" }\n',
    );
    const r = await run(['validate', '--config', configFile(`proxy: { profiles_dir: ${dir} }\n`)]);
    expect(r.code).toBe(1);
    expect(r.out).toContain(
      `FAIL profile mine (${join(dir, 'mine.yaml')}): path_indices.chat: index 2 is outside api.paths, which has 2 entries — fix: use an index from 0 to 1`,
    );
    expect(r.out).toMatch(/^FAIL profile mine .*: models\.name_format: template "\{\{\.Id\}\}" is not supported/m);
    // The built-in defaults pass; an enabled informational feature says it is not acted on.
    const ok = await run(['validate']);
    expect(ok.out).toMatch(/^PASS profile pagedengine \(.*\): features\.metrics informational: the gateway does not act on it$/m);
  });

  it('reloads on SIGHUP without dropping a stream in flight, and keeps serving', async () => {
    const fake = await new FakeBackend({ family: 'localrunner', reply: 'a b c d e f g h' }).start();
    fake.behaviour.chunkDelayMs = 50;
    const text = (aliases: string) =>
      `server: { host: 127.0.0.1, port: 0 }\npipelines: { watch: false }\nmodel_aliases: { ${aliases} }\ndiscovery:\n  static:\n    endpoints:\n      - { name: l, type: localrunner, url: "${fake.url}" }\n`;
    const file = configFile(text('first: [test-model]'));
    const { child, port } = await serve(['--config', file]);
    children.push(child);
    const detail = async (id: string) => (await request(`http://127.0.0.1:${port}/gw/models/${id}`)).statusCode;
    expect(await detail('second')).toBe(404);
    // A stream in flight across the reload.
    let firstChunk!: () => void;
    const started = new Promise<void>((r) => (firstChunk = r));
    const stream = new Promise<string>((resolveStream, rejectStream) => {
      const req = httpRequest({ hostname: '127.0.0.1', port, path: '/gw/localrunner/api/chat', method: 'POST', agent: false }, (res) => {
        let body = '';
        res.on('data', (d) => {
          body += d;
          firstChunk();
        });
        res.on('end', () => resolveStream(body));
        res.on('error', rejectStream);
      });
      req.on('error', rejectStream);
      req.end('{"model":"test-model","messages":[]}');
    });
    await started;
    writeFileSync(file, text('second: [test-model]'));
    child.kill('SIGHUP');
    await waitFor(async () => (await detail('second')) === 200, 'the alias from the edited config after SIGHUP');
    expect(await detail('first')).toBe(404);
    const body = await stream;
    expect(JSON.parse(body.trim().split('\n').at(-1)!).done).toBe(true);
    const status = (await (await request(`http://127.0.0.1:${port}/internal/status`)).body.json()) as any;
    expect(status.reload).toMatchObject({ generation: 2, ok: true, error: null });
    expect(child.exitCode).toBeNull();
    const exited = new Promise((r) => child.on('exit', r));
    child.kill('SIGTERM');
    expect(await exited).toBe(0);
    await fake.stop();
  });
});
