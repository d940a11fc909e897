// Streams (issue 22): memory with many slow SSE streams open at once, and the time of each stream
// at 256 at once, through the gateway (one process) and the bare undici proxy, in one run. Memory:
// RSS at rest, and the peak (VmHWM) while STREAMS streams of 10 events 500 ms apart are open (each
// on its own connection). Tail: 256 streams of 10 events 20 ms apart, twice over; each stream's
// total time, p50 and p99. Standalone: `node bench/streams.js [--streams 5000]`.
import { readFileSync } from 'node:fs';
import { Agent, request } from 'undici';
import { forkReady, endpointLines, round, startGateway, streamBody, runAlone } from './lib.js';

const arg = process.argv.indexOf('--streams');
const STREAMS = arg > 0 ? Number(process.argv[arg + 1]) : 5000;
const PATH = '/gw/pagedengine/v1/chat/completions';
const status = (pid, field) => Number(new RegExp(`^${field}:\\s+(\\d+)`, 'm').exec(readFileSync(`/proc/${pid}/status`, 'utf8'))[1]) / 1024;

/** `count` streams at once, each on its own connection; every stream's total time (ms). */
async function streams(url, count, gapMs) {
  const agent = new Agent({ connections: count, pipelining: 0, keepAliveTimeout: 1000 });
  const body = streamBody.replace(/}$/, `,"bench_gap_ms":${gapMs}}`);
  try {
    const times = await Promise.all(
      Array.from({ length: count }, async () => {
        const t = performance.now();
        const res = await request(url + PATH, { method: 'POST', body, headers: { 'content-type': 'application/json' }, dispatcher: agent });
        const text = await res.body.text();
        if (res.statusCode !== 200 || !text.includes('[DONE]')) throw new Error(`stream failed: ${res.statusCode}`);
        return performance.now() - t;
      }),
    );
    return times.sort((a, b) => a - b);
  } finally {
    await agent.close();
  }
}

const pct = (sorted, p) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];

async function target(name, url, pid) {
  await streams(url, 64, 2); // warm-up
  const rest = status(pid, 'VmRSS');
  await streams(url, STREAMS, 500);
  const peak = status(pid, 'VmHWM');
  const tail = [...(await streams(url, 256, 20)), ...(await streams(url, 256, 20))].sort((a, b) => a - b);
  return { name, rest, peak, p50: pct(tail, 50), p99: pct(tail, 99) };
}

export async function streamsSection(backendPort) {
  const floor = await forkReady('floor-proxy.js', [`http://127.0.0.1:${backendPort}`, '0']);
  const gw = await startGateway(['logging: { level: warn }', ...endpointLines(backendPort)]);
  const rows = [await target('bare undici proxy', `http://127.0.0.1:${floor.port}`, floor.pid), await target('gateway', `http://127.0.0.1:${gw.port}`, gw.pid)];
  process.kill(floor.pid);
  process.kill(gw.pid, 'SIGTERM');
  const [f, g] = rows;
  return `## Streams: memory and tail (issue 22)

${STREAMS} SSE streams open at once (10 events 500 ms apart, each on its own connection), then 256 at once twice
(10 events 20 ms apart), through each proxy (one process) to the lean backend. RSS at rest after a warm-up; peak:
the process's high-water mark (VmHWM) over the run.

| proxy | RSS at rest MB | peak RSS MB (${STREAMS} streams) | grew MB | 256 streams p50 ms | p99 ms |
|---|---|---|---|---|---|
${rows.map((r) => `| ${r.name} | ${round(r.rest, 0)} | ${round(r.peak, 0)} | ${round(r.peak - r.rest, 0)} | ${round(r.p50, 1)} | ${round(r.p99, 1)} |`).join('\n')}

Peak RSS: ${round(g.peak / f.peak, 2)} × the bare proxy's (target ≤ 1.1); p99 at 256 streams ${round(g.p99 / f.p99, 2)} × its.
`;
}

await runAlone(import.meta.url, streamsSection);
