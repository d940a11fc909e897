// Benchmark: (a) direct to a lean fake backend, (b) the floor pass-through proxy, (c) the gateway's
// proxy pipeline — non-streaming chat at concurrency 1 and 64, and a streaming chat (first byte,
// total). All three run in one go on this machine; results go to bench/RESULTS.md as ratios.
// Usage: npm run bench [-- --quick]
import autocannon from 'autocannon';
import { fork, spawn } from 'node:child_process';
import { writeFileSync, mkdtempSync, openSync } from 'node:fs';
import { createServer } from 'node:net';
import { cpus, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { Client } from 'undici';

const quick = process.argv.includes('--quick');
const DURATION = quick ? 3 : 10;
const SEQUENTIAL = quick ? 1000 : 5000;
const STREAMS = quick ? 100 : 300;
const here = new URL('.', import.meta.url).pathname;
const children = [];

const chatBody = JSON.stringify({
  model: 'bench-model', stream: false, max_tokens: 64, temperature: 0.7,
  messages: [{ role: 'system', content: 'You are a helpful assistant.' }, { role: 'user', content: 'Say hello to the benchmark in one short sentence, please.' }],
});
const streamBody = chatBody.replace('"stream":false', '"stream":true');
const headers = { 'content-type': 'application/json' };

function freePort() {
  return new Promise((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

function forkReady(script, args) {
  return new Promise((resolve, reject) => {
    const child = fork(join(here, script), args, { stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
    children.push(child);
    child.once('message', (m) => resolve(m.port));
    child.once('exit', (code) => reject(new Error(`${script} exited ${code}`)));
  });
}

async function startGateway(backendPort) {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'gw-bench-'));
  const config = join(dir, 'config.yaml');
  writeFileSync(config, [
    `server: { host: 127.0.0.1, port: ${port} }`,
    'logging: { level: info }',
    'discovery:',
    '  static:',
    '    endpoints:',
    `      - { name: bench, type: pagedengine, url: "http://127.0.0.1:${backendPort}", check_interval: 5s }`,
  ].join('\n'));
  const log = openSync(join(dir, 'gw.log'), 'w');
  const child = spawn(process.execPath, [join(here, '../bin/gw.js'), 'serve', '--config', config], { stdio: ['ignore', log, 'inherit'] });
  children.push(child);
  for (let i = 0; i < 100; i++) {
    try {
      const res = await fetch(`http://127.0.0.1:${port}/internal/health`);
      if (res.ok) return port;
    } catch {}
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error('gateway did not start');
}

const percentile = (sorted, p) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];

/** Concurrency 1 on one keep-alive connection: per-request latency in microseconds. */
async function sequential(url, path) {
  const client = new Client(url, { pipelining: 1 });
  const times = [];
  for (let i = 0; i < SEQUENTIAL + 300; i++) {
    const t = process.hrtime.bigint();
    const res = await client.request({ path, method: 'POST', headers, body: chatBody });
    await res.body.arrayBuffer();
    if (res.statusCode !== 200) throw new Error(`status ${res.statusCode}`);
    if (i >= 300) times.push(Number(process.hrtime.bigint() - t) / 1000);
  }
  await client.close();
  times.sort((a, b) => a - b);
  const mean = times.reduce((a, b) => a + b, 0) / times.length;
  return { p50_us: percentile(times, 50), p99_us: percentile(times, 99), rps: 1e6 / mean };
}

async function load(url, path) {
  const r = await autocannon({ url: url + path, method: 'POST', headers, body: chatBody, connections: 64, duration: DURATION, pipelining: 1 });
  if (r.non2xx || r.errors) throw new Error(`load errors: ${r.non2xx} non-2xx, ${r.errors} errors`);
  return { rps: r.requests.average, p50_ms: r.latency.p50, p99_ms: r.latency.p99 };
}

/** Sequential streams: time to the first body byte and to the end, milliseconds. */
async function streaming(url, path) {
  const client = new Client(url);
  const first = [];
  const total = [];
  for (let i = 0; i < STREAMS + 20; i++) {
    const t = performance.now();
    const res = await client.request({ path, method: 'POST', headers, body: streamBody });
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

const round = (x, d = 1) => Math.round(x * 10 ** d) / 10 ** d;

async function main() {
  const backendPort = await forkReady('backend.js', ['0']);
  const floorPort = await forkReady('floor-proxy.js', [`http://127.0.0.1:${backendPort}`, '0']);
  const gwPort = await startGateway(backendPort);
  const targets = {
    direct: [`http://127.0.0.1:${backendPort}`, '/v1/chat/completions'],
    floor: [`http://127.0.0.1:${floorPort}`, '/gw/pagedengine/v1/chat/completions'],
    gateway: [`http://127.0.0.1:${gwPort}`, '/gw/pagedengine/v1/chat/completions'],
  };
  const results = { direct: {}, floor: {}, gateway: {} };
  for (const [name, [url, path]] of Object.entries(targets)) await load(url, path); // warm-up
  for (const [name, [url, path]] of Object.entries(targets)) results[name].c1 = await sequential(url, path);
  for (const [name, [url, path]] of Object.entries(targets)) results[name].c64 = await load(url, path);
  for (const [name, [url, path]] of Object.entries(targets)) results[name].stream = await streaming(url, path);
  console.log(JSON.stringify(results, null, 2));

  const g = results.gateway;
  const f = results.floor;
  const d = results.direct;
  const ratio = g.c64.rps / f.c64.rps;
  const addedP50 = g.c1.p50_us - f.c1.p50_us;
  const ttfbDelta = g.stream.ttfb_p50_ms - d.stream.ttfb_p50_ms;
  const row = (n, r) => `| ${n} | ${round(r.c1.p50_us, 0)} | ${round(r.c1.p99_us, 0)} | ${round(r.c1.rps, 0)} | ${round(r.c64.rps, 0)} | ${r.c64.p50_ms} | ${r.c64.p99_ms} | ${round(r.stream.ttfb_p50_ms, 2)} | ${round(r.stream.total_p50_ms, 2)} |`;
  const md = `# Benchmark results

Machine: ${cpus().length} × ${cpus()[0].model}, ${Math.round(totalmem() / 2 ** 30)} GiB, Node ${process.version}, ${new Date().toISOString().slice(0, 10)}.
Command: \`npm run bench\` (bench/run.js${quick ? ' --quick' : ''}): backend, floor proxy and gateway each in its own process,
the load generator in a fourth; all on 127.0.0.1; every figure below from one run.

- **direct** — the lean fake backend (bench/backend.js).
- **floor** — the simplest undici pass-through proxy (bench/floor-proxy.js), the floor for Node.
- **gateway** — \`gw serve\` with the built-in proxy pipeline (allowlist, body buffering, balancing,
  failover-ready forwarding, headers both ways, stats, one info log line per request to a file).

Non-streaming chat (${chatBody.length}-byte body): concurrency 1 = ${SEQUENTIAL} sequential requests on one keep-alive
connection; concurrency 64 = autocannon, ${DURATION} s. Streaming chat: ${STREAMS} sequential streams of 10 SSE events 2 ms apart.

| target | c1 p50 µs | c1 p99 µs | c1 req/s | c64 req/s | c64 p50 ms | c64 p99 ms | stream first byte p50 ms | stream total p50 ms |
|---|---|---|---|---|---|---|---|---|
${row('direct', d)}
${row('floor', f)}
${row('gateway', g)}

| target (issue 2) | measured | verdict |
|---|---|---|
| gateway req/s at c64 ≥ 70% of floor | ${round(ratio * 100, 1)}% | ${ratio >= 0.7 ? 'met' : 'NOT met'} |
| gateway p50 at c1 ≤ floor + 150 µs | +${round(addedP50, 0)} µs | ${addedP50 <= 150 ? 'met' : 'NOT met'} |
| stream first byte ≤ direct + 2 ms | +${round(ttfbDelta, 2)} ms | ${ttfbDelta <= 2 ? 'met' : 'NOT met'} |
`;
  writeFileSync(join(here, 'RESULTS.md'), md);
  console.log(md);
}

main()
  .catch((err) => {
    console.error(err);
    process.exitCode = 1;
  })
  .finally(() => {
    for (const c of children) c.kill();
  });
