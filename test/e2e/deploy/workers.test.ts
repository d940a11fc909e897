// gw serve --workers 2 (issue 22): two workers serve one port and share one host's state — its
// health checks (what one worker's request found routes the other), its rate-limit buckets and
// concurrency queues (limits hold host-wide), its status and metrics (the host's counts, each
// worker's share). A killed worker is replaced and costs only the request it held; SIGHUP
// reloads every worker; SIGTERM drains them. Each worker is told apart by the pid its
// connection's /internal/process reports.
import { spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { Client } from 'undici';
import { stringify } from 'yaml';
import { FakeBackend } from '../../../engine/demo/index.js';
import { cleanEnv, configFile, serve } from '../../helpers/cli.js';
import { endpoint, NO_RATE_LIMITS } from '../../helpers/gateway.js';
import { waitFor } from '../../helpers/wait.js';

const PROMTOOL = '/usr/bin/promtool';
let child: ChildProcess | null = null;
let fakes: FakeBackend[] = [];
let clients: Client[] = [];
afterEach(async () => {
  for (const c of clients) await c.destroy();
  if (child && child.exitCode === null && child.signalCode === null) {
    const exited = new Promise((r) => child!.once('exit', r));
    child.kill('SIGKILL');
    await exited;
  }
  for (const f of fakes) await f.stop();
  [child, fakes, clients] = [null, [], []];
});

const CHAT = JSON.stringify({ model: 'test-model', messages: [{ role: 'user', content: 'hi' }] });

function config(extra: Record<string, any> = {}) {
  return {
    ...extra,
    server: { host: '127.0.0.1', port: 0, shutdown_timeout: '5s', workers: 2, rate_limits: NO_RATE_LIMITS, ...(extra.server ?? {}) },
    logging: { level: 'info' },
    discovery: { model_discovery: { enabled: true, interval: '1h' }, ...(extra.discovery ?? {}) },
  };
}

async function start(cfg: Record<string, any>, args: string[] = []) {
  const file = configFile(stringify(cfg));
  const started = await serve(['-c', file, ...args], cleanEnv());
  child = started.child;
  return { ...started, file, base: `http://127.0.0.1:${started.port}` };
}

/** One connection to the gateway, and the pid of the worker that serves it. */
async function connection(base: string): Promise<{ client: Client; pid: number }> {
  const client = new Client(base, { pipelining: 0 });
  clients.push(client);
  const res = await client.request({ path: '/internal/process', method: 'GET' });
  const json = (await res.body.json()) as { pid: number };
  return { client, pid: json.pid };
}

/** A connection to each worker (new connections go to the workers in turn). */
async function oneEach(base: string): Promise<{ client: Client; pid: number }[]> {
  const byPid = new Map<number, { client: Client; pid: number }>();
  for (let i = 0; i < 20 && byPid.size < 2; i++) {
    const c = await connection(base);
    if (!byPid.has(c.pid)) byPid.set(c.pid, c);
  }
  expect(byPid.size).toBe(2);
  return [...byPid.values()];
}

async function getJson(client: Client, path: string): Promise<any> {
  const res = await client.request({ path, method: 'GET' });
  return res.body.json();
}

/** A chat request for `model` on the connection. */
async function chatWith(client: Client, model: string) {
  const res = await client.request({
    path: '/gw/pagedengine/v1/chat/completions',
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }] }),
  });
  return { status: res.statusCode, text: await res.body.text() };
}

async function chat(client: Client, path = '/gw/pagedengine/v1/chat/completions') {
  const res = await client.request({ path, method: 'POST', body: CHAT, headers: { 'content-type': 'application/json' } });
  const text = await res.body.text();
  return { status: res.statusCode, headers: res.headers, text };
}

describe('gw serve --workers 2', () => {
  it("serves from two processes; status and metrics report the host, with each worker's share", async () => {
    const fake = await new FakeBackend({ family: 'pagedengine' }).start();
    fakes.push(fake);
    // Health checked at start only: the host's one first round is all the backend sees. The
    // command line's --workers beats the file's server.workers.
    const gw = await start(
      config({ server: { workers: 1 }, discovery: { static: { endpoints: [endpoint('engine', 'pagedengine', fake.url, { check_interval: '1h' })] } } }),
      ['--workers', '2'],
    );
    const [a, b] = await oneEach(gw.base);
    expect(a.pid).not.toBe(b.pid);
    for (const c of [a, a, a, b, b]) expect((await chat(c.client)).status).toBe(200);

    const status = await getJson(a.client, '/internal/status');
    expect(status.statistics.requests_total).toBe(5);
    expect(status.endpoints.engine.requests).toBe(5);
    expect(status.workers.map((w: any) => [w.pid, w.requests_total]).sort()).toEqual(
      [
        [a.pid, 3],
        [b.pid, 2],
      ].sort(),
    );
    const fromB = await getJson(b.client, '/internal/status/endpoints');
    expect(fromB.endpoints[0].requests).toBe(5);
    const proc = await getJson(b.client, '/internal/process');
    expect(proc.workers).toHaveLength(2);

    const metrics = await (await a.client.request({ path: '/internal/metrics', method: 'GET' })).body.text();
    expect(metrics).toMatch(/^gw_proxied_requests_total 5$/m);
    // What every worker reads from the host's state is the host's value, not summed per worker.
    expect(metrics).toMatch(/^gw_endpoint_up\{[^}]*endpoint="engine"[^}]*\} 1$/m);
    expect(metrics).toMatch(/^gw_endpoint_requests_total\{[^}]*endpoint="engine"[^}]*\} 5$/m);
    // One verdict, not one per worker: exactly one state reads 1.
    expect(metrics.match(/^gw_system_status\{[^}]*\} 1$/gm)).toHaveLength(1);
    // prom-client's cluster aggregation still makes text Prometheus takes (where promtool is installed).
    if (existsSync(PROMTOOL)) {
      const check = spawnSync(PROMTOOL, ['check', 'metrics'], { input: metrics, encoding: 'utf8' });
      expect(check.stdout + check.stderr).toBe('');
    }
    // One host checks the backend's health, not one per worker.
    expect(fake.requestsTo('/health')).toHaveLength(1);
  });

  it('a connection failure one worker saw takes the endpoint out of rotation in every worker', async () => {
    const first = await new FakeBackend({ family: 'pagedengine', name: 'first' }).start();
    const second = await new FakeBackend({ family: 'pagedengine', name: 'second' }).start();
    fakes.push(first, second);
    // Health checks at start only (interval 1h): nothing but the host's re-check after a
    // request's failure can tell a worker that the first endpoint went away.
    const eps = [
      endpoint('first', 'pagedengine', first.url, { priority: 200, check_interval: '1h' }),
      endpoint('second', 'pagedengine', second.url, { priority: 100, check_interval: '1h' }),
    ];
    const gw = await start(config({ discovery: { static: { endpoints: eps } } }));
    const [a, b] = await oneEach(gw.base);
    await first.stop();
    const failedOver = await chat(a.client);
    expect(failedOver.status).toBe(200);
    expect(failedOver.headers['x-gw-endpoint']).toBe('second');
    // Worker b never sent anything to it, yet learns it is down from the host.
    await waitFor(
      async () => (await getJson(b.client, '/internal/status/endpoints')).endpoints.find((e: any) => e.name === 'first').routable === false || undefined,
      'worker b sees the first endpoint out of rotation',
    );
    const direct = await chat(b.client);
    expect(direct.status).toBe(200);
    expect(direct.headers['x-gw-endpoint']).toBe('second');
    const status = await getJson(b.client, '/internal/status');
    expect(status.endpoints.first.errors).toBe(1); // only worker a's request ever tried it
  });

  it('opens a breaker after proxy_failures failures of the host, wherever they happened', async () => {
    const fake = await new FakeBackend({ family: 'pagedengine' }).start();
    fakes.push(fake);
    // Each request one attempt (no retry on a 500), health checks at start only and a long open
    // period: nothing but the five failures moves the breaker.
    const gw = await start(
      config({
        proxy: { retry: { on_statuses: [] }, circuit_breaker: { proxy_failures: 5, initial_open_timeout: '60s', open_timeout: '60s' } },
        discovery: { static: { endpoints: [endpoint('engine', 'pagedengine', fake.url, { check_interval: '1h' })] } },
      }),
    );
    const [a, b] = await oneEach(gw.base);
    fake.behaviour.status = 500;
    // Three failures on worker a, two on worker b: five for the host, under five for either.
    for (const c of [a, b, a, b, a]) expect((await chat(c.client)).status).toBe(500);
    const breaker = async (c: { client: Client }) => (await getJson(c.client, '/internal/status/endpoints')).endpoints[0].circuit_breaker.state;
    await waitFor(async () => (await breaker(a)) === 'open' || undefined, 'the breaker open in worker a');
    await waitFor(async () => (await breaker(b)) === 'open' || undefined, 'the breaker open in worker b');
    expect(fake.requestsTo('/v1/chat/completions')).toHaveLength(5);
  });

  it('holds a per-IP rate limit across the workers', async () => {
    const fake = await new FakeBackend({ family: 'pagedengine' }).start();
    fakes.push(fake);
    // One token a minute: nothing refills while the test runs, however busy the machine.
    const limits = { ...NO_RATE_LIMITS, per_ip_requests_per_minute: 1, burst_size: 4 };
    const gw = await start(config({ server: { rate_limits: limits }, discovery: { static: { endpoints: [endpoint('engine', 'pagedengine', fake.url)] } } }));
    const [a, b] = await oneEach(gw.base);
    const statuses: number[] = [];
    for (let i = 0; i < 5; i++) for (const c of [a, b]) statuses.push((await chat(c.client)).status);
    expect(statuses.filter((s) => s === 200)).toHaveLength(4);
    expect(statuses.filter((s) => s === 429)).toHaveLength(6);
  });

  it("holds an endpoint's concurrency limit across the workers", async () => {
    const fake = await new FakeBackend({ family: 'pagedengine' }).start();
    fakes.push(fake);
    // One request at a time, none waits: while worker a's request holds the host's one slot,
    // worker b's is turned away (with a slot per worker, it would reach the engine).
    const eps = [endpoint('engine', 'pagedengine', fake.url, { max_concurrent_requests: 1, max_queued_requests: 0 })];
    const gw = await start(config({ discovery: { static: { endpoints: eps } } }));
    const [a, b] = await oneEach(gw.base);
    let open!: () => void;
    fake.behaviour.holdUntil = new Promise<void>((r) => (open = r));
    const held = chat(a.client);
    await waitFor(() => fake.requestsTo('/v1/chat/completions').length === 1 || undefined, 'the first request reached the engine');
    const refused = await chat(b.client);
    expect(refused.status).toBe(429);
    expect(JSON.parse(refused.text).error.code).toBe('QUEUE_FULL');
    expect(fake.requestsTo('/v1/chat/completions')).toHaveLength(1);
    // Worker b's status shows the host's queue: the slot worker a's request holds.
    const queue = (await getJson(b.client, '/internal/status/endpoints')).endpoints[0].queue;
    expect(queue).toMatchObject({ in_flight: 1, max_concurrent_requests: 1, rejected_full: 1 });
    open();
    expect((await held).status).toBe(200);
    // The slot goes back to the host (worker a tells it once the reply is over; that message and
    // worker b's next request race, so the test waits for the host to have it); then b takes it.
    await waitFor(
      async () => (await getJson(b.client, '/internal/status/endpoints')).endpoints[0].queue.in_flight === 0 || undefined,
      'the slot back with the host',
    );
    expect((await chat(b.client)).status).toBe(200);
  });

  it("serves an engine's queue by model across the workers (model_switching: the host decides)", async () => {
    const fake = await new FakeBackend({ family: 'pagedengine', models: [{ name: 'alpha' }, { name: 'beta' }], modelsAtOnce: 1 }).start();
    fakes.push(fake);
    const eps = [endpoint('gpu', 'pagedengine', fake.url, { max_concurrent_requests: 1, model_switching: { models_at_once: 1 } })];
    const gw = await start(config({ discovery: { static: { endpoints: eps } } }));
    const [a, b] = await oneEach(gw.base);
    const c = await connection(gw.base);
    // Status on a connection of its own (one request at a time on each).
    const watch = await connection(gw.base);
    const queued = async () => (await getJson(watch.client, '/internal/status/endpoints')).endpoints[0].queue.queued;
    const ask = (client: Client, model: string) => chatWith(client, model);
    let open!: () => void;
    fake.behaviour.holdUntil = new Promise<void>((r) => (open = r));
    const first = ask(a.client, 'alpha');
    await waitFor(() => fake.traffic.length === 1 || undefined, 'alpha at the engine');
    // beta from one worker, then alpha from a connection of either: alpha (held) goes first.
    const beta = ask(b.client, 'beta');
    await waitFor(async () => (await queued()) === 1 || undefined, 'beta waiting');
    const alpha = ask(c.client, 'alpha');
    await waitFor(async () => (await queued()) === 2 || undefined, 'alpha waiting');
    fake.behaviour.holdUntil = null;
    open();
    expect((await Promise.all([first, beta, alpha])).map((r) => r.status)).toEqual([200, 200, 200]);
    expect(fake.traffic.map((r) => r.json.model)).toEqual(['alpha', 'alpha', 'beta']);
    expect(fake.gpu!.switches).toBe(2);
    const queue = (await getJson(a.client, '/internal/status/endpoints')).endpoints[0].queue;
    expect(queue.model_switching).toMatchObject({ held: ['beta'], switches: 2 });
  });

  it('when the host dies, its workers finish the streams they hold and exit', async () => {
    const fake = await new FakeBackend({ family: 'pagedengine' }).start();
    fakes.push(fake);
    fake.behaviour.chunkDelayMs = 50;
    const gw = await start(config({ discovery: { static: { endpoints: [endpoint('engine', 'pagedengine', fake.url)] } } }));
    const [a, b] = await oneEach(gw.base);
    const stream = await a.client.request({
      path: '/gw/pagedengine/v1/chat/completions',
      method: 'POST',
      body: JSON.stringify({ model: 'test-model', stream: true, messages: [{ role: 'user', content: 'hi' }] }),
      headers: { 'content-type': 'application/json' },
    });
    child!.kill('SIGKILL');
    expect(await stream.body.text()).toContain('[DONE]');
    const alive = (pid: number) => {
      try {
        process.kill(pid, 0);
        return true;
      } catch {
        return false;
      }
    };
    await waitFor(() => (!alive(a.pid) && !alive(b.pid)) || undefined, 'both workers exited');
  });

  it('replaces a killed worker; only the request it held fails; SIGHUP reloads every worker; SIGTERM drains', async () => {
    const fake = await new FakeBackend({ family: 'pagedengine' }).start();
    fakes.push(fake);
    fake.behaviour.chunkDelayMs = 50;
    const cfg = config({ discovery: { static: { endpoints: [endpoint('engine', 'pagedengine', fake.url)] } } });
    const gw = await start(cfg);
    const [a] = await oneEach(gw.base);
    // A stream held by worker a when it is killed: that one fails.
    const stream = await a.client.request({
      path: '/gw/pagedengine/v1/chat/completions',
      method: 'POST',
      body: JSON.stringify({ model: 'test-model', stream: true, messages: [{ role: 'user', content: 'hi' }] }),
      headers: { 'content-type': 'application/json' },
    });
    const broke = stream.body.text().then(
      () => false,
      () => true,
    );
    process.kill(a.pid, 'SIGKILL');
    expect(await broke).toBe(true);
    await waitFor(() => gw.output().includes('"msg":"worker exited; starting another"') || undefined, 'the host saw the worker exit');
    // Every request after it is served: by worker b, then by b and the replacement.
    for (let i = 0; i < 4; i++) expect((await chat((await connection(gw.base)).client)).status).toBe(200);
    await waitFor(() => gw.output().includes('"msg":"worker replaced"') || undefined, 'the replacement worker listens');
    const pids = new Set<number>();
    for (let i = 0; i < 6; i++) pids.add((await connection(gw.base)).pid);
    expect(pids.has(a.pid)).toBe(false);
    expect(pids.size).toBe(2);

    // SIGHUP: the host reloads, then each worker (generation 2 wherever a request lands).
    writeFileSync(gw.file, stringify({ ...cfg, model_aliases: { fast: ['test-model'] } }));
    child!.kill('SIGHUP');
    for (let i = 0; i < 6; i++) {
      const c = await connection(gw.base);
      await waitFor(async () => (await getJson(c.client, '/internal/status')).reload.generation >= 2 || undefined, `worker ${c.pid} reloaded`);
    }
    // A file change: the host sees it and reloads, then every worker.
    writeFileSync(gw.file, stringify({ ...cfg, model_aliases: { fast: ['test-model'], quick: ['test-model'] } }));
    for (let i = 0; i < 6; i++) {
      const c = await connection(gw.base);
      await waitFor(
        async () => (await getJson(c.client, '/internal/status')).reload.generation >= 3 || undefined,
        `worker ${c.pid} reloaded on the file change`,
      );
    }

    // SIGTERM: a stream under way finishes, then the host and its workers exit 0.
    const last = await (await connection(gw.base)).client.request({
      path: '/gw/pagedengine/v1/chat/completions',
      method: 'POST',
      body: JSON.stringify({ model: 'test-model', stream: true, messages: [{ role: 'user', content: 'hi' }] }),
      headers: { 'content-type': 'application/json' },
    });
    const exited = new Promise<number | null>((r) => child!.once('exit', r));
    child!.kill('SIGTERM');
    const text = await last.body.text();
    expect(text).toContain('[DONE]');
    expect(await exited).toBe(0);
  });
});
