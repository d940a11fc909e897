// Rate limits (issue 11 item 2): the gateway's CPU time per request with every limit on but never
// reached — the global bucket, the client's per-IP bucket and the endpoint's per-endpoint bucket,
// each taken once per request, plus the X-RateLimit-* headers on every reply — against the same
// gateway with the limits off. Standalone: `node bench/limits.js [--quick]` (starts its own backend).
import { cpuAdded, loadAlternating, round, startGateway, ROUNDS, ROUND_S, pct, chatBody, endpointLines, runAlone } from './lib.js';

const HIGH = 1_000_000_000;
const LIMITS_ON = `rate_limits: { global_requests_per_minute: ${HIGH}, per_ip_requests_per_minute: ${HIGH}, health_requests_per_minute: ${HIGH}, internal_requests_per_minute: ${HIGH}, burst_size: ${HIGH} }`;

export async function limitsSection(backendPort) {
  const path = '/gw/pagedengine/v1/chat/completions';
  const off = await startGateway(['logging: { level: info }', ...endpointLines(backendPort)]);
  const on = await startGateway(['logging: { level: info }', ...endpointLines(backendPort, 'pagedengine', `, requests_per_minute: ${HIGH}`)], {}, LIMITS_ON);
  const targets = [off, on].map((g) => ({ url: `http://127.0.0.1:${g.port}`, path, body: chatBody, pid: g.pid }));
  const [a, b] = await loadAlternating(targets, 16, ROUNDS, ROUND_S);
  const added = cpuAdded(a, b);
  const row = (name, x, more) => `| ${name} | ${round(x.rps, 0)} | ${round(x.cpu_us, 1)} | ${more === undefined ? '—' : pct(more)} |`;
  return `## Rate limits

The chat request at concurrency 16 (autocannon, ${ROUNDS} alternating rounds of ${ROUND_S} s per gateway) to two gateways in
front of the lean backend: **limits off** (every \`server.rate_limits\` rate 0); **limits on** (global, per-IP and the
endpoint's own \`requests_per_minute\` all set, at rates never reached: three token buckets taken per request and the
\`X-RateLimit-*\` headers on every reply). "CPU added" is the median over the rounds of the extra gateway CPU time per request.

| gateway | c16 req/s | CPU µs/req | CPU added |
|---|---|---|---|
${row('limits off', a)}
${row('limits on (never reached)', b, added)}
`;
}

await runAlone(import.meta.url, limitsSection);
