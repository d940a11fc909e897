// gw serve --workers N (issue 22): throughput and CPU time per request with 1, 2, 4, 8 workers (as
// many as the machine has cores for; `--workers 1,2` picks the counts) against nginx with the same
// number of worker processes and the bare undici proxy (one process), all in one run; the memory
// each setup holds at rest; and what the host-wide state costs a request (a per-IP limit on, never
// reached: one round trip to the host per request). CPU time is the whole process tree's (host +
// workers; nginx master + workers), read from /proc. Standalone: `node bench/workers.js [--quick]`.
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import autocannon from 'autocannon';
import { chatBody, cpuMs, endpointLines, forkReady, freePort, quick, RATE_LIMITS_OFF, round, startGateway, runAlone } from './lib.js';

const SECONDS = quick ? 3 : 8;
const CONNECTIONS = 64;
const PATH = '/gw/pagedengine/v1/chat/completions';

/** A process and every process below it (Linux /proc). */
function tree(pid) {
  const out = [pid];
  for (const task of safe(() => readdirSync(`/proc/${pid}/task`), [])) {
    for (const child of safe(() => readFileSync(`/proc/${pid}/task/${task}/children`, 'utf8'), '')
      .trim()
      .split(/\s+/)
      .filter(Boolean))
      out.push(...tree(Number(child)));
  }
  return out;
}

function safe(f, fallback) {
  try {
    return f();
  } catch {
    return fallback;
  }
}

const treeCpuMs = (pid) => tree(pid).reduce((n, p) => n + safe(() => cpuMs(p), 0), 0);
const treeRssMb = (pid) =>
  tree(pid).reduce((n, p) => n + safe(() => Number(/^VmRSS:\s+(\d+)/m.exec(readFileSync(`/proc/${p}/status`, 'utf8'))[1]) / 1024, 0), 0);

async function measure(url, pid) {
  await autocannon({ url: url + PATH, method: 'POST', headers: { 'content-type': 'application/json' }, body: chatBody, connections: CONNECTIONS, duration: 1 });
  const cpu0 = treeCpuMs(pid);
  const r = await autocannon({
    url: url + PATH,
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: chatBody,
    connections: CONNECTIONS,
    duration: SECONDS,
  });
  if (r.non2xx || r.errors) throw new Error(`load errors on ${url}: ${r.non2xx} non-2xx, ${r.errors} errors`);
  return { rps: r.requests.total / r.duration, cpu_us: ((treeCpuMs(pid) - cpu0) * 1000) / r.requests.total, p99_ms: r.latency.p99 };
}

async function waitUp(url) {
  for (let i = 0; i < 100; i++) {
    try {
      if ((await fetch(url)).status < 500) return;
    } catch {}
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${url} did not start`);
}

async function startNginx(workers, backendPort) {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'gw-bench-nginx-'));
  writeFileSync(
    join(dir, 'nginx.conf'),
    `
worker_processes ${workers};
daemon off;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path ${dir}/body;
  proxy_temp_path ${dir}/proxy;
  upstream backend { server 127.0.0.1:${backendPort}; keepalive 64; }
  server {
    listen 127.0.0.1:${port};
    location /gw/pagedengine/ {
      proxy_pass http://backend/;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
    }
  }
}
`,
  );
  const child = spawn('nginx', ['-c', join(dir, 'nginx.conf'), '-p', dir], { stdio: ['ignore', 'ignore', 'inherit'] });
  await waitUp(`http://127.0.0.1:${port}/gw/pagedengine/health`);
  return { url: `http://127.0.0.1:${port}`, pid: child.pid, stop: () => child.kill('SIGQUIT') };
}

/** Worker counts the machine has cores for: 1, 2, 4, 8 (`--workers 1,2` on the command line picks). */
export function workerCounts() {
  const arg = process.argv.indexOf('--workers');
  return arg > 0 ? process.argv[arg + 1].split(',').map(Number) : [1, 2, 4, 8].filter((n) => n <= availableParallelism());
}

export async function workersSection(backendPort, counts = workerCounts()) {
  const haveNginx = spawnSync('nginx', ['-v']).status === 0;
  const floor = await forkReady('floor-proxy.js', [`http://127.0.0.1:${backendPort}`, '0']);
  const floorUrl = `http://127.0.0.1:${floor.port}`;
  const floorRest = treeRssMb(floor.pid);
  const floorRun = await measure(floorUrl, floor.pid);
  const rows = [];
  let one = null;
  for (const n of counts) {
    const gw = await startGateway(['logging: { level: warn }', ...endpointLines(backendPort)], {}, `workers: ${n}, ${RATE_LIMITS_OFF}`);
    const url = `http://127.0.0.1:${gw.port}`;
    await new Promise((r) => setTimeout(r, 1000)); // every worker up (the host answers once all listen)
    const rest = treeRssMb(gw.pid);
    const g = await measure(url, gw.pid);
    process.kill(gw.pid, 'SIGTERM');
    let ng = null;
    if (haveNginx) {
      const nginx = await startNginx(n, backendPort);
      ng = await measure(nginx.url, nginx.pid);
      nginx.stop();
    }
    one ??= g;
    rows.push({ n, g, ng, rest });
  }
  // What the host-wide state costs: a per-IP limit on (never reached), 2 workers: one take a request from the host.
  let limits = '';
  if (counts.includes(2)) {
    const HIGH = 1_000_000_000;
    const on = `workers: 2, rate_limits: { global_requests_per_minute: ${HIGH}, per_ip_requests_per_minute: ${HIGH}, health_requests_per_minute: 0, internal_requests_per_minute: 0, burst_size: ${HIGH}, per_endpoint: { default_requests_per_minute: 0 } }`;
    const gw = await startGateway(['logging: { level: warn }', ...endpointLines(backendPort)], {}, on);
    await new Promise((r) => setTimeout(r, 1000));
    const l = await measure(`http://127.0.0.1:${gw.port}`, gw.pid);
    process.kill(gw.pid, 'SIGTERM');
    const two = rows.find((r) => r.n === 2).g;
    limits = `\nWhat the host-wide state costs a request: with a per-IP and a global limit on (never reached), 2 workers take their tokens from the host's buckets — from tokens the host lent them, asking it once per lease (leased-buckets.ts): ${round(l.rps, 0)} req/s and ${round(l.cpu_us, 1)} µs CPU per request over the tree, against ${round(two.rps, 0)} req/s and ${round(two.cpu_us, 1)} µs without limits (${round((l.cpu_us / two.cpu_us - 1) * 100, 1)}% CPU). Requests without such a limit never ask the host; health, model lists and breaker counts reach the workers as messages, off the request's path.\n`;
  }
  process.kill(floor.pid);
  const table = rows
    .map(
      ({ n, g, ng, rest }) =>
        `| ${n} | ${round(g.rps, 0)} | ${round(g.rps / one.rps, 2)} | ${round(g.cpu_us, 1)} | ${round(g.p99_ms, 1)} | ${ng ? round(ng.rps, 0) : '—'} | ${ng ? round(ng.cpu_us, 1) : '—'} | ${round(rest, 0)} |`,
    )
    .join('\n');
  const cores = availableParallelism();
  return `## Workers: gw serve --workers N (issue 22)

Non-streaming chat at concurrency ${CONNECTIONS} (autocannon in the bench process, ${SECONDS} s after a 1 s warm-up) through the
gateway with N workers (N = 1: one process, no host), nginx with N worker processes (proxy_pass, upstream keep-alive),
and the bare undici proxy (one process), all to the lean backend (one process). CPU µs/request: the whole process
tree (host + workers; nginx master + workers). RSS at rest: the tree's, before the load.
Machine: ${cores} cores for the load generator, the backend and the proxy together${cores < 8 ? ` — with ${cores} cores the scaling targets (throughput ≥ 0.8 × N) cannot be judged here: the backend and the load generator take the cores the workers would use` : ''}.

| workers | gateway req/s | × one worker | gateway CPU µs/req | p99 ms | nginx req/s | nginx CPU µs/req | gateway RSS at rest MB |
|---|---|---|---|---|---|---|---|
${table}

Bare undici proxy: ${round(floorRun.rps, 0)} req/s, ${round(floorRun.cpu_us, 1)} µs CPU per request, ${round(floorRest, 0)} MB at rest. One worker's CPU per
request is ${round(one.cpu_us / floorRun.cpu_us, 2)} × the bare proxy's (target ≤ 1.1).
${limits}`;
}

await runAlone(import.meta.url, workersSection);
