// Instructions per request, counted by valgrind's callgrind: a measure that does not move with
// what else the machine is doing (the CPU-time comparisons on two shared cores move by several per
// cent from one run to the next). A gateway runs under callgrind with counting off; after a warm-up
// it is switched on for a fixed number of sequential requests, then off. Reported: all instructions
// per request, and those left when the JIT compiler's own work is taken out (it may still be
// optimising new functions after the warm-up; what remains is the request path's steady cost).
// Skipped, with a line saying so, where valgrind is not installed. With GW_PERF_MAP=1 the gateway
// also writes /tmp/perf-PID.map (node --perf-basic-prof): the names of its compiled JavaScript,
// for reading the callgrind file per function.
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from 'undici';
import { freePort, RATE_LIMITS_OFF, endpointLines } from './lib.js';

export const hasCallgrind = () => spawnSync('valgrind', ['--version']).status === 0 && spawnSync('callgrind_annotate', ['--version']).error === undefined;

/** Connections at once during the warm-up. */
const WARM_LANES = 8;

const COMPILER = /v8::internal::(compiler|maglev|baseline)::|Turbofan|Maglev/;

async function waitReady(ready, child) {
  for (let i = 0; i < 600; i++) {
    if (child.exitCode !== null) throw new Error('the server under callgrind exited');
    try {
      if (await ready()) return;
    } catch {}
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error('the server under callgrind did not start');
}

/** `count` requests one after another on one connection; with `lanes`, that many connections
 *  at once (a warm-up: streams spend most of their time waiting on the backend's gaps). */
async function requests(port, path, body, count, more = {}, lanes = 1) {
  const headers = { 'content-type': 'application/json', ...more };
  const lane = async (n) => {
    const client = new Client(`http://127.0.0.1:${port}`, { pipelining: 1 });
    for (let i = 0; i < n; i++) {
      const res = await client.request({ path, method: 'POST', headers, body });
      await res.body.arrayBuffer();
      if (res.statusCode !== 200) throw new Error(`status ${res.statusCode}`);
    }
    await client.close();
  };
  await Promise.all(Array.from({ length: lanes }, (_, i) => lane(Math.floor(count / lanes) + (i < count % lanes ? 1 : 0))));
}

/** Instructions per request of the gateway built in `root` ({ total, withoutCompiler }); `route`:
 *  the family the backend is registered as, the path requests go to and headers they carry. */
export async function instructionsPerRequest(
  root,
  backendPort,
  body,
  counts,
  endpoints = 1,
  extra = '',
  configLines = [],
  route = { type: 'pagedengine', path: '/gw/pagedengine/v1/chat/completions' },
) {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'gw-callgrind-'));
  const config = join(dir, 'config.yaml');
  // No custom pipelines: a folder that does not exist (this one holds the config).
  const lines = endpointLines(backendPort, route.type, extra);
  if (endpoints === 2) lines.push(lines.at(-1).replace('name: bench,', 'name: bench-2,'));
  writeFileSync(
    config,
    [
      `server: { host: 127.0.0.1, port: ${port}, ${RATE_LIMITS_OFF} }`,
      `pipelines: { dir: ${join(dir, 'none')} }`,
      'logging: { level: info }',
      ...configLines,
      ...lines,
    ].join('\n'),
  );
  const ready = async () => (await fetch(`http://127.0.0.1:${port}/internal/health`)).ok;
  return instructionsOf([join(root, 'bin/gw.js'), 'serve', '--config', config], { port, ready, dir }, route, body, counts);
}

/** Instructions per request of the Node program `argv` (script and arguments) serving on `port`
 *  once `ready()` resolves true: `warm` requests uncounted, then `count` counted. */
export async function instructionsOf(argv, { port, ready, dir = mkdtempSync(join(tmpdir(), 'gw-callgrind-')) }, route, body, { warm, count }) {
  const out = join(dir, 'callgrind.out');
  const child = spawn(
    'valgrind',
    [
      '--tool=callgrind',
      '--instr-atstart=no',
      '--smc-check=all-non-file',
      `--callgrind-out-file=${out}`,
      process.execPath,
      ...(process.env.GW_PERF_MAP ? ['--perf-basic-prof'] : []),
      ...argv,
    ],
    { stdio: 'ignore' },
  );
  try {
    await waitReady(ready, child);
    const { path, headers } = route;
    // Most of the warm-up on several connections at once, its last part as the count runs (one
    // connection): what the JIT learnt from the concurrent part settles before counting starts.
    const tail = Math.ceil(warm / 4);
    await requests(port, path, body, warm - tail, headers, WARM_LANES);
    await requests(port, path, body, tail, headers);
    spawnSync('callgrind_control', ['-i', 'on', String(child.pid)]);
    await requests(port, path, body, count, headers);
    spawnSync('callgrind_control', ['-i', 'off', String(child.pid)]);
  } finally {
    if (child.exitCode === null) {
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGINT');
      await exited;
    }
  }
  const text = spawnSync('callgrind_annotate', ['--threshold=100', out], { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 }).stdout;
  let total = 0;
  let compiler = 0;
  for (const line of text.split('\n')) {
    const m = /^\s*([\d,]+) \(\s*[\d.]+%\)\s+(.*)$/.exec(line);
    if (!m) continue;
    const n = Number(m[1].replaceAll(',', ''));
    if (m[2].includes('PROGRAM TOTALS')) total = n;
    else if (COMPILER.test(m[2])) compiler += n;
  }
  return { total: total / count, withoutCompiler: (total - compiler) / count, out, pid: child.pid };
}
