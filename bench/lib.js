// Shared pieces of the benchmarks: processes on loopback, and the three ways of measuring.
import autocannon from 'autocannon';
import { fork, spawn } from 'node:child_process';
import { mkdtempSync, openSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from 'undici';

export const here = new URL('.', import.meta.url).pathname;
const children = [];
export const stopAll = () => children.forEach((c) => c.kill());
const headers = { 'content-type': 'application/json' };

export function freePort() {
  return new Promise((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

export function forkReady(script, args) {
  return new Promise((resolve, reject) => {
    const child = fork(join(here, script), args, { stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
    children.push(child);
    child.once('message', (m) => resolve(m.port));
    child.once('exit', (code) => reject(new Error(`${script} exited ${code}`)));
  });
}

/** `gw serve` on a free port with the given config lines (and optional pipeline files); logs to a file. */
export async function startGateway(configLines, pipelines = {}) {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'gw-bench-'));
  const pipelineDir = join(dir, 'pipelines');
  if (Object.keys(pipelines).length) {
    (await import('node:fs')).mkdirSync(pipelineDir);
    for (const [name, text] of Object.entries(pipelines)) writeFileSync(join(pipelineDir, name), text);
  }
  const config = join(dir, 'config.yaml');
  writeFileSync(config, [`server: { host: 127.0.0.1, port: ${port} }`, `pipelines: { dir: ${pipelineDir} }`, ...configLines].join('\n'));
  const child = spawn(process.execPath, [join(here, '../bin/gw.js'), 'serve', '--config', config], { stdio: ['ignore', openSync(join(dir, 'gw.log'), 'w'), 'inherit'] });
  children.push(child);
  for (let i = 0; i < 100; i++) {
    try {
      if ((await fetch(`http://127.0.0.1:${port}/internal/health`)).ok) return port;
    } catch {}
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error('gateway did not start');
}

const percentile = (sorted, p) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];

/**
 * Concurrency 1: each target on its own keep-alive connection, the targets taking turns request by
 * request, so drift on the machine (other processes, frequency) falls on all of them alike.
 * Per-request latency in microseconds.
 */
export async function sequential(targets, count) {
  const clients = targets.map((t) => new Client(t.url, { pipelining: 1 }));
  const times = targets.map(() => []);
  const warm = Math.ceil(count / 10);
  for (let i = 0; i < count + warm; i++) {
    for (let k = 0; k < targets.length; k++) {
      const { path, body } = targets[k];
      const t = process.hrtime.bigint();
      const res = await clients[k].request({ path, method: 'POST', headers, body });
      await res.body.arrayBuffer();
      if (res.statusCode !== 200) throw new Error(`${targets[k].url}${path}: status ${res.statusCode}`);
      if (i >= warm) times[k].push(Number(process.hrtime.bigint() - t) / 1000);
    }
  }
  await Promise.all(clients.map((c) => c.close()));
  return times.map((list) => {
    list.sort((a, b) => a - b);
    const mean = list.reduce((a, b) => a + b, 0) / list.length;
    return { p50_us: percentile(list, 50), p99_us: percentile(list, 99), mean_us: mean, rps: 1e6 / mean };
  });
}

export async function load(url, path, body, connections, duration) {
  const r = await autocannon({ url: url + path, method: 'POST', headers, body, connections, duration, pipelining: 1 });
  if (r.non2xx || r.errors) throw new Error(`load errors: ${r.non2xx} non-2xx, ${r.errors} errors`);
  return { rps: r.requests.average, p50_ms: r.latency.p50, p99_ms: r.latency.p99 };
}

/** Sequential streams: time to the first body byte and to the end, milliseconds. */
export async function streaming(url, path, body, count) {
  const client = new Client(url);
  const first = [];
  const total = [];
  for (let i = 0; i < count + 20; i++) {
    const t = performance.now();
    const res = await client.request({ path, method: 'POST', headers, body });
    let firstAt = 0;
    for await (const _chunk of res.body) if (!firstAt) firstAt = performance.now();
    if (i >= 20) {
      first.push(firstAt - t);
      total.push(performance.now() - t);
    }
  }
  await client.close();
  first.sort((a, b) => a - b);
  total.sort((a, b) => a - b);
  return { ttfb_p50_ms: percentile(first, 50), ttfb_p99_ms: percentile(first, 99), total_p50_ms: percentile(total, 50) };
}

export const round = (x, d = 1) => Math.round(x * 10 ** d) / 10 ** d;
