// Rate limits shared through Redis (issue 22, server.rate_limits.store: redis): the gateway's CPU
// time and throughput per request with the global and per-IP limits on but never reached, kept in
// memory against kept in a redis-server on loopback (one Lua script a request, both buckets), and
// the wall time a request waits for it. Needs redis-server (Debian's package): the section says so
// and stops where there is none. Standalone: `node bench/shared-limits.js [--quick]`.
import { spawn, spawnSync } from 'node:child_process';
import { cpuAdded, freePort, loadAlternating, pct, round, startGateway, timeAdded, ROUNDS, ROUND_S, chatBody, endpointLines, runAlone } from './lib.js';

const HIGH = 1_000_000_000;
const LIMITS = `global_requests_per_minute: ${HIGH}, per_ip_requests_per_minute: ${HIGH}, health_requests_per_minute: ${HIGH}, internal_requests_per_minute: ${HIGH}, burst_size: ${HIGH}`;

export async function sharedLimitsSection(backendPort) {
  if (spawnSync('redis-server', ['--version']).status !== 0)
    return '## Rate limits shared through Redis (issue 22)\n\nNot measured: redis-server is not installed (apt-get install redis-server).\n';
  const port = await freePort();
  const redis = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
  try {
    await new Promise((r) => setTimeout(r, 500)); // it listens within moments; the gateways fail open until it does
    const path = '/gw/pagedengine/v1/chat/completions';
    const memory = await startGateway(['logging: { level: info }', ...endpointLines(backendPort)], {}, `rate_limits: { ${LIMITS} }`);
    const shared = await startGateway(
      ['logging: { level: info }', ...endpointLines(backendPort)],
      {},
      `rate_limits: { ${LIMITS}, store: redis, redis: { url: "redis://127.0.0.1:${port}" } }`,
    );
    const targets = [memory, shared].map((g) => ({ url: `http://127.0.0.1:${g.port}`, path, body: chatBody, pid: g.pid }));
    const [a, b] = await loadAlternating(targets, 16, ROUNDS, ROUND_S);
    const row = (name, x, cpu, wall) =>
      `| ${name} | ${round(x.rps, 0)} | ${round(x.cpu_us, 1)} | ${cpu === undefined ? '—' : pct(cpu)} | ${round(x.p50_ms, 2)} | ${wall === undefined ? '—' : pct(wall)} |`;
    return `## Rate limits shared through Redis (issue 22)

The chat request at concurrency 16 (autocannon, ${ROUNDS} alternating rounds of ${ROUND_S} s per gateway) to two gateways in front of
the lean backend, the global and per-IP limits on at rates never reached: **memory** (each replica's own buckets) and
**redis** (\`server.rate_limits.store: redis\`, a redis-server on loopback: one Lua script a request takes both buckets
in). Redis's own CPU is not counted. "Added" columns are medians over the rounds against memory.

| store | c16 req/s | gateway CPU µs/req | CPU added | p50 ms (worst round) | time per request added |
|---|---|---|---|---|---|
${row('memory', a)}
${row('redis', b, cpuAdded(a, b), timeAdded(a, b))}
`;
  } finally {
    redis.kill('SIGKILL');
  }
}

await runAlone(import.meta.url, sharedLimitsSection);
