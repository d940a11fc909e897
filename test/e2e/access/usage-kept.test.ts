// What the keys used, and their budgets, survive the process (auth.usage_file: written at most a
// second after a change, so a kill -9 loses at most the last second), and are one state for the
// workers of gw serve --workers 2: one token limit, whichever worker a request reaches.
import type { ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Client, request } from 'undici';
import { stringify } from 'yaml';
import { keyHash } from '../../../engine/core/keys.js';
import { FakeBackend } from '../../../engine/demo/index.js';
import { cleanEnv, configFile, emptyDir, serve } from '../../helpers/cli.js';
import { endpoint, NO_RATE_LIMITS } from '../../helpers/gateway.js';
import { waitFor } from '../../helpers/wait.js';

const OPS = 'gw-ops-secret-kept';
const USER = 'gw-user-secret-kept';
let children: ChildProcess[] = [];
let fakes: FakeBackend[] = [];
let clients: Client[] = [];
afterEach(async () => {
  for (const c of clients) await c.destroy();
  for (const child of children) {
    if (child.exitCode !== null || child.signalCode !== null) continue;
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGKILL');
    await exited;
  }
  for (const f of fakes) await f.stop();
  [children, fakes, clients] = [[], [], []];
});

async function start(fake: FakeBackend, usageFile: string, more: { workers?: number; user?: Record<string, unknown> } = {}) {
  const cfg = {
    server: { host: '127.0.0.1', port: 0, shutdown_timeout: '5s', workers: more.workers ?? 1, rate_limits: NO_RATE_LIMITS },
    logging: { level: 'info' },
    auth: {
      keys: [
        { name: 'ops', hash: keyHash(OPS) },
        { name: 'user', hash: keyHash(USER), ...more.user },
      ],
      admin: ['ops'],
      usage_file: usageFile,
    },
    discovery: { static: { endpoints: [endpoint('paged', 'pagedengine', fake.url, { check_interval: '60s' })] } },
  };
  const started = await serve(['-c', configFile(stringify(cfg))], cleanEnv());
  children.push(started.child);
  return { ...started, base: `http://127.0.0.1:${started.port}` };
}

const chats = (f: FakeBackend) => f.received.filter((r) => r.url.endsWith('/chat/completions')).length;
const chat = (more: object = {}) => JSON.stringify({ model: 'model-a', messages: [{ role: 'user', content: 'hi' }], ...more });

async function post(base: string, body: string, client?: Client) {
  const opts = { method: 'POST' as const, headers: { authorization: `Bearer ${USER}`, 'content-type': 'application/json' }, body };
  const res = client
    ? await client.request({ path: '/gw/pagedengine/v1/chat/completions', ...opts })
    : await request(`${base}/gw/pagedengine/v1/chat/completions`, opts);
  await res.body.dump();
  return res.statusCode;
}

async function usage(base: string) {
  const res = await request(`${base}/internal/usage?key=user`, { headers: { authorization: `Bearer ${OPS}` } });
  return ((await res.body.json()) as any).keys.user;
}

describe('usage kept', () => {
  it('survives kill -9: what was written a second after the last request is read back at start', async () => {
    const fake = await new FakeBackend({ family: 'pagedengine', name: 'paged', models: [{ name: 'model-a' }] }).start();
    fakes.push(fake);
    const file = join(emptyDir(), 'usage.json');
    const first = await start(fake, file, { user: { tokens_per_day: 100_000 } });
    for (let i = 0; i < 3; i++) expect(await post(first.base, chat())).toBe(200);
    const before = await usage(first.base);
    expect(before.total.all.requests).toBe(3);
    // The signal: the file holds the third request (written within a second of it).
    await waitFor(
      () => (existsSync(file) && JSON.parse(readFileSync(file, 'utf8')).usage.user?.total['model-a']?.requests === 3 ? true : undefined),
      'the file written',
    );
    const exited = new Promise((r) => first.child.once('exit', r));
    first.child.kill('SIGKILL');
    await exited;
    const second = await start(fake, file, { user: { tokens_per_day: 100_000 } });
    const after = await usage(second.base);
    expect(after.total).toEqual(before.total);
    expect(after.budget.tokens_per_day.used).toBe(before.budget.tokens_per_day.used);
  });

  it('two workers keep one ledger: one max_concurrent and one count, whichever worker serves', async () => {
    const fake = await new FakeBackend({ family: 'pagedengine', name: 'paged', models: [{ name: 'model-a' }] }).start();
    fakes.push(fake);
    const gw = await start(fake, join(emptyDir(), 'usage.json'), { workers: 2, user: { max_concurrent: 1 } });
    // A connection to each worker (new connections go to the workers in turn).
    const byPid = new Map<number, Client>();
    for (let i = 0; i < 20 && byPid.size < 2; i++) {
      const client = new Client(gw.base, { pipelining: 0 });
      clients.push(client);
      const res = await client.request({ path: '/internal/process', method: 'GET', headers: { authorization: `Bearer ${OPS}` } });
      byPid.set(((await res.body.json()) as { pid: number }).pid, client);
    }
    expect(byPid.size).toBe(2);
    const [one, two] = [...byPid.values()];
    let release!: () => void;
    fake.behaviour.holdUntil = new Promise((r) => (release = r));
    const held = post(gw.base, chat(), one);
    await waitFor(() => (chats(fake) > 0 ? true : undefined), 'the first request at the backend');
    // The other worker's request meets the same limit.
    expect(await post(gw.base, chat(), two)).toBe(429);
    release();
    expect(await held).toBe(200);
    await waitFor(async () => ((await usage(gw.base)).in_flight === 0 ? true : undefined), 'the first request settled');
    expect(await post(gw.base, chat(), two)).toBe(200);
    // A worker tells its host when a request is over, after its client has the reply: the count
    // arrives a moment later.
    await waitFor(async () => ((await usage(gw.base)).total.all.requests === 2 ? true : undefined), 'both requests counted');
  });
});
