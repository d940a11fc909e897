// The container users take: the example config, the image's own config, and the Dockerfile's
// instructions that can be checked without Docker (its HEALTHCHECK run against a real gateway).
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer, type AddressInfo, BlockList, isIPv6, type Server } from 'node:net';
import { resolve } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { cleanEnv, run, serve } from '../../helpers/cli.js';
import { checkConfig } from '../../../engine/core/config.js';
import { loadSchema } from '../../../engine/core/schema.js';

const EXAMPLE = resolve('config/config.example.yaml');
const CONTAINER = resolve('config/container.yaml');

let cleanups: (() => void)[] = [];
afterEach(() => {
  for (const c of cleanups) c();
  cleanups = [];
});

/** Dockerfile instructions with continuation lines joined and comments dropped. */
function dockerfile(): { op: string; args: string }[] {
  const text = readFileSync('Dockerfile', 'utf8').replace(/\\\n/g, ' ');
  return text
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith('#'))
    .map((l) => {
      const [op, ...rest] = l.split(/\s+/);
      return { op: op.toUpperCase(), args: rest.join(' ') };
    });
}

/** The instructions of the last stage: what the image runs. */
function runtimeStage() {
  const all = dockerfile();
  const from = all.map((i) => i.op).lastIndexOf('FROM');
  return all.slice(from);
}

/** Every key the config schema knows, as dotted paths ("server.rate_limits.burst_size"); an
 *  endpoint's keys under "discovery.static.endpoints[]". */
function schemaKeys(): string[] {
  const schema = loadSchema('config') as any;
  const keys: string[] = [];
  const walk = (node: any, path: string) => {
    if (node.$ref?.startsWith('#/definitions/')) node = schema.definitions[node.$ref.slice('#/definitions/'.length)];
    if (node.type === 'array' && node.items?.$ref?.startsWith('#/definitions/')) return walk(node.items, `${path}[]`);
    if (!node.properties) return void keys.push(path);
    for (const [key, child] of Object.entries(node.properties)) walk(child, path ? `${path}.${key}` : key);
  };
  walk(schema, '');
  return keys;
}

/** Whether the parsed YAML sets a dotted path ("a[].b": any element of the list a). */
function sets(doc: unknown, path: string): boolean {
  let values = [doc];
  for (const part of path.split('.')) {
    const list = part.endsWith('[]');
    const key = list ? part.slice(0, -2) : part;
    values = values.flatMap((v) => (v && typeof v === 'object' && key in v ? [(v as any)[key]] : []));
    if (list) values = values.flatMap((v) => (Array.isArray(v) ? v : []));
  }
  return values.length > 0;
}

describe('config/config.example.yaml', () => {
  it('passes gw validate with no warning', async () => {
    const r = await run(['validate', '--config', EXAMPLE]);
    expect(r.code, r.out + r.err).toBe(0);
    expect(r.out).toMatch(/^PASS config .*config\.example\.yaml: valid$/m);
    expect(r.out).toMatch(/^summary: \d+ passed, 0 warnings, 0 failed$/m);
  });

  it('names every key of the config schema, set or in a comment (alternatives, folders that must exist)', () => {
    const text = readFileSync(EXAMPLE, 'utf8');
    const doc = parse(text);
    const commented = (key: string) => new RegExp(`^\\s*#.*\\b${key}:`, 'm').test(text);
    const missing = schemaKeys().filter((path) => !sets(doc, path) && !commented(path.split('.').at(-1)!.replace('[]', '')));
    expect(missing, 'add these keys to config/config.example.yaml, with a comment').toEqual([]);
  });
});

describe('config/container.yaml (the image default)', () => {
  it('passes gw validate with no warning', async () => {
    const r = await run(['validate', '--config', CONTAINER]);
    expect(r.code, r.out + r.err).toBe(0);
    expect(r.out).toMatch(/^summary: \d+ passed, 0 warnings, 0 failed$/m);
  });

  it('binds every interface and opens the dashboard to loopback and the private IPv4 ranges only', () => {
    const { loaded, problems } = checkConfig(CONTAINER, {});
    expect(problems).toEqual([]);
    const { server, dashboard } = loaded!.config;
    expect(server.host).toBe('0.0.0.0');
    expect(dashboard.enabled).toBe(true);
    const allowed = new BlockList();
    for (const cidr of dashboard.access_policy.allowed_cidrs) {
      const [net, bits] = cidr.split('/');
      allowed.addSubnet(net, Number(bits), isIPv6(net) ? 'ipv6' : 'ipv4');
    }
    const inside = ['127.0.0.1', '10.0.0.1', '10.255.255.254', '172.16.0.1', '172.17.0.1', '172.31.255.254', '192.168.0.1', '192.168.255.254'];
    const outside = ['8.8.8.8', '9.255.255.255', '11.0.0.1', '172.15.255.255', '172.32.0.1', '192.167.255.255', '192.169.0.1', '100.64.0.1', '169.254.1.1'];
    for (const ip of inside) expect(allowed.check(ip, 'ipv4'), ip).toBe(true);
    for (const ip of outside) expect(allowed.check(ip, 'ipv4'), ip).toBe(false);
    expect(allowed.check('::1', 'ipv6')).toBe(true);
  });

  it('listens on 0.0.0.0 when served', async () => {
    const { child, output } = await serve(['--config', CONTAINER], { ...cleanEnv(), GW_SERVER_PORT: '0' });
    cleanups.push(() => child.kill('SIGKILL'));
    const line = output()
      .split('\n')
      .find((l) => l.includes('"msg":"gateway listening"'))!;
    expect(JSON.parse(line).host).toBe('0.0.0.0');
  });
});

describe('Dockerfile', () => {
  it('runs gw serve as a non-root user on the container config, in exec form', () => {
    const stage = runtimeStage();
    const one = (op: string) => stage.filter((i) => i.op === op).at(-1)?.args;
    expect(stage[0].args).toMatch(/^node:24-slim\b/); // the LTS line
    expect(
      dockerfile()
        .filter((i) => i.op === 'FROM')
        .every((i) => /^node:24-slim\b/.test(i.args)),
    ).toBe(true);
    expect(one('USER')).toMatch(/^(?!root\b|0\b)\w+/);
    expect(JSON.parse(one('ENTRYPOINT')!)).toEqual(['node', 'bin/gw.js']);
    expect(JSON.parse(one('CMD')!)).toEqual(['serve']);
    // The config the image serves is the file tested above.
    const gwConfig = one('ENV')!.match(/\bGW_CONFIG=(\S+)/)![1];
    expect(stage.some((i) => i.op === 'COPY' && i.args === `config/container.yaml ${gwConfig}`)).toBe(true);
    expect(one('EXPOSE')).toBe(String(parse(readFileSync(CONTAINER, 'utf8')).server.port));
    // Production dependencies only, without the prepare script (tsc is a dev dependency).
    expect(stage.some((i) => i.op === 'RUN' && /npm ci --omit=dev --ignore-scripts/.test(i.args))).toBe(true);
  });

  describe('HEALTHCHECK', () => {
    const healthcheck = (port: number): Promise<number | null> => {
      const line = dockerfile().find((i) => i.op === 'HEALTHCHECK')!.args;
      const [command, ...args] = JSON.parse(line.slice(line.indexOf('CMD ') + 4)) as string[];
      expect(command).toBe('node');
      return new Promise((done) => {
        const child: ChildProcess = spawn(process.execPath, args, { env: { ...cleanEnv(), GW_SERVER_PORT: String(port) }, stdio: 'ignore' });
        child.on('exit', (code) => done(code));
      });
    };
    const listening = (server: Server) => new Promise<number>((r) => server.listen(0, '127.0.0.1', () => r((server.address() as AddressInfo).port)));

    it('exits 0 against a running gateway (the container config)', async () => {
      const { child, port } = await serve(['--config', CONTAINER], { ...cleanEnv(), GW_SERVER_PORT: '0' });
      cleanups.push(() => child.kill('SIGKILL'));
      expect(await healthcheck(port)).toBe(0);
    });

    it('exits 1 against a dead port', async () => {
      const server = createServer();
      const port = await listening(server);
      await new Promise((r) => server.close(r));
      expect(await healthcheck(port)).toBe(1);
    });

    it('exits 1 on its own timeout against a server that never answers', async () => {
      const server = createServer(() => {}); // accepts, reads, never replies
      cleanups.push(() => server.close());
      expect(await healthcheck(await listening(server))).toBe(1);
    });
  });
});
