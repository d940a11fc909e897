// Shared pieces of the benchmarks: processes on loopback, and the three ways of measuring.
import autocannon from 'autocannon';
import { fork, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from 'undici';

export const here = new URL('.', import.meta.url).pathname;

const CLOCK_TICKS = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout.trim()) || 100;

/** CPU time (user + system) a process has used so far, in milliseconds (Linux /proc). */
export function cpuMs(pid) {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return ((Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS) * 1000;
}

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

/** A helper process that reports its port over IPC: { port, pid }. */
export function forkReady(script, args) {
  return new Promise((resolve, reject) => {
    const child = fork(join(here, script), args, { stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
    children.push(child);
    child.once('message', (m) => resolve({ port: m.port, pid: child.pid }));
    child.once('exit', (code) => reject(new Error(`${script} exited ${code}`)));
  });
}

/** server.rate_limits off: the load comes from one address, far past the per-IP default. */
export const RATE_LIMITS_OFF =
  'rate_limits: { global_requests_per_minute: 0, per_ip_requests_per_minute: 0, health_requests_per_minute: 0, internal_requests_per_minute: 0, per_endpoint: { default_requests_per_minute: 0 } }';

/** `gw serve` on a free port with the given config lines (and optional pipeline files; `server`:
 *  more server keys, rate limits off by default); logs to a file. Resolves with { port, pid, dir, pipelineDir }. */
/** `root`: the checkout whose bin/gw.js runs (another build, for a before/after comparison). */
export async function startGateway(configLines, pipelines = {}, server = RATE_LIMITS_OFF, root = join(here, '..')) {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'gw-bench-'));
  const pipelineDir = join(dir, 'pipelines');
  (await import('node:fs')).mkdirSync(pipelineDir);
  for (const [name, text] of Object.entries(pipelines)) writeFileSync(join(pipelineDir, name), text);
  const config = join(dir, 'config.yaml');
  writeFileSync(config, [`server: { host: 127.0.0.1, port: ${port}, ${server} }`, `pipelines: { dir: ${pipelineDir} }`, ...configLines].join('\n'));
  const child = spawn(process.execPath, [join(root, 'bin/gw.js'), 'serve', '--config', config], {
    stdio: ['ignore', openSync(join(dir, 'gw.log'), 'w'), 'inherit'],
  });
  children.push(child);
  for (let i = 0; i < 100; i++) {
    try {
      if ((await fetch(`http://127.0.0.1:${port}/internal/health`)).ok) return { port, pid: child.pid, dir, pipelineDir };
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
  return times.map((raw) => {
    const list = [...raw].sort((a, b) => a - b);
    const mean = list.reduce((a, b) => a + b, 0) / list.length;
    return { p50_us: percentile(list, 50), p99_us: percentile(list, 99), mean_us: mean, rps: 1e6 / mean, raw };
  });
}

/** b's extra time over a, from requests made back to back: the median of the paired differences,
 *  relative to a's median. Wake-up jitter hits both of a pair alike and cancels. */
export function pairedAdded(a, b) {
  const diffs = a.raw.map((t, i) => b.raw[i] - t).sort((x, y) => x - y);
  return diffs[diffs.length >> 1] / a.p50_us;
}

/** One load run; with a pid, also the CPU time that process spent per request (µs). */
export async function load(url, path, body, connections, duration, pid) {
  const cpu0 = pid ? cpuMs(pid) : 0;
  const r = await autocannon({ url: url + path, method: 'POST', headers, body, connections, duration, pipelining: 1 });
  if (r.non2xx || r.errors) throw new Error(`load errors: ${r.non2xx} non-2xx, ${r.errors} errors`);
  return { rps: r.requests.average, p50_ms: r.latency.p50, p99_ms: r.latency.p99, cpu_us: pid ? ((cpuMs(pid) - cpu0) * 1000) / r.requests.total : undefined };
}

/**
 * Load several targets in alternating rounds (a, b, a, b…), so drift on a two-core machine
 * falls on each alike; req/s over all of a target's rounds.
 */
export async function loadAlternating(targets, connections, rounds, seconds) {
  // A warm-up round each first, so JIT compilation does not land in the first measured round.
  for (const { url, path, body } of targets) await autocannon({ url: url + path, method: 'POST', headers, body, connections, duration: 1, pipelining: 1 });
  const totals = targets.map(() => ({ requests: 0, seconds: 0, cpu: 0, p50: [], p99: [], rounds: [], cpuRounds: [] }));
  for (let r = 0; r < rounds; r++) {
    for (let k = 0; k < targets.length; k++) {
      const { url, path, body, pid } = targets[k];
      const cpu0 = cpuMs(pid);
      const res = await autocannon({ url: url + path, method: 'POST', headers, body, connections, duration: seconds, pipelining: 1 });
      const used = cpuMs(pid) - cpu0;
      totals[k].cpu += used;
      totals[k].cpuRounds.push((used * 1000) / res.requests.total);
      if (res.non2xx || res.errors) throw new Error(`load errors: ${res.non2xx} non-2xx, ${res.errors} errors`);
      totals[k].requests += res.requests.total;
      totals[k].rounds.push(res.requests.total / res.duration);
      totals[k].seconds += res.duration;
      totals[k].p50.push(res.latency.p50);
      totals[k].p99.push(res.latency.p99);
    }
  }
  return totals.map((t) => ({
    rps: t.requests / t.seconds,
    rps_rounds: t.rounds,
    cpu_us: (t.cpu * 1000) / t.requests,
    cpu_rounds: t.cpuRounds,
    p50_ms: Math.max(...t.p50),
    p99_ms: Math.max(...t.p99),
  }));
}

function medianOf(values) {
  const v = [...values].sort((x, y) => x - y);
  const mid = v.length >> 1;
  return v.length % 2 ? v[mid] : (v[mid - 1] + v[mid]) / 2;
}

/** b's extra CPU time per request over a's: the median over the alternating rounds of b/a − 1. */
export function cpuAdded(a, b) {
  return medianOf(a.cpu_rounds.map((x, i) => b.cpu_rounds[i] / x - 1));
}

/** b's extra wall time per request (connections / req/s) over a's: the median over the rounds. */
export function timeAdded(a, b) {
  return medianOf(a.rps_rounds.map((x, i) => x / b.rps_rounds[i] - 1));
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

/** A section run on its own (`node bench/<file>.js`): the lean backend started, the section
 *  printed, every process stopped. Does nothing when the file was imported (bench/run.js). */
export async function runAlone(moduleUrl, section) {
  if (moduleUrl !== `file://${process.argv[1]}`) return;
  try {
    const { port } = await forkReady('backend.js', ['0']);
    console.log(await section(port));
  } finally {
    stopAll();
  }
}

export const round = (x, d = 1) => Math.round(x * 10 ** d) / 10 ** d;

// Shared by every section: the run's length, the chat request, and a one-endpoint config.
export const quick = process.argv.includes('--quick');
/** Alternating rounds for the A/B comparisons, and seconds per round. */
export const ROUNDS = quick ? 3 : 7;
export const ROUND_S = quick ? 1.5 : 2;
export const pct = (x) => `${x >= 0 ? '+' : ''}${round(x * 100, 1)}%`;
export const chatBody = JSON.stringify({
  model: 'bench-model',
  stream: false,
  max_tokens: 64,
  temperature: 0.7,
  messages: [
    { role: 'system', content: 'You are a helpful assistant.' },
    { role: 'user', content: 'Say hello to the benchmark in one short sentence, please.' },
  ],
});
export const streamBody = chatBody.replace('"stream":false', '"stream":true');
/** `extra`: more endpoint keys (`, key: value`); a check_interval there replaces the 5s. */
export const endpointLines = (backendPort, type = 'pagedengine', extra = '') => [
  'discovery:',
  '  static:',
  '    endpoints:',
  `      - { name: bench, type: ${type}, url: "http://127.0.0.1:${backendPort}"${extra.includes('check_interval') ? '' : ', check_interval: 5s'}${extra} }`,
];
