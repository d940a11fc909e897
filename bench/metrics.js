// Bench section: what /internal/metrics costs per request — the same gateway with metrics on
// (the default: the `metrics` step on every route) and off (`metrics.enabled: false`: no step),
// non-streaming and streaming chat at concurrency 16 in alternating rounds; gateway CPU time per
// request from /proc. Standalone: node bench/metrics.js [--quick] (needs `npm run build`).
import { fileURLToPath } from 'node:url';
import { cpuAdded, forkReady, loadAlternating, round, startGateway, stopAll, ROUNDS, ROUND_S, pct, chatBody, streamBody, endpointLines } from './lib.js';

export async function metricsSection(backendPort) {
  const path = '/gw/pagedengine/v1/chat/completions';
  const off = await startGateway(['logging: { level: info }', 'metrics: { enabled: false }', ...endpointLines(backendPort)]);
  const on = await startGateway(['logging: { level: info }', ...endpointLines(backendPort)]);
  const targets = (body) => [off, on].map((g) => ({ url: `http://127.0.0.1:${g.port}`, path, body, pid: g.pid }));
  const [chatOff, chatOn] = await loadAlternating(targets(chatBody), 16, ROUNDS, ROUND_S);
  const [streamOff, streamOn] = await loadAlternating(targets(streamBody), 16, ROUNDS, ROUND_S);
  const chatAdded = cpuAdded(chatOff, chatOn);
  const streamAdded = cpuAdded(streamOff, streamOn);
  // One scrape after the load: its size, and that the timed requests are all there.
  const text = await (await fetch(`http://127.0.0.1:${on.port}/internal/metrics`)).text();
  const counted = text
    .split('\n')
    .filter((l) => l.startsWith('gw_request_duration_seconds_count{') && l.includes('route="proxy"'))
    .reduce((n, l) => n + Number(l.split(' ').pop()), 0);
  const row = (name, x, added) => `| ${name} | ${round(x.rps, 0)} | ${round(x.cpu_us, 0)} | ${added === undefined ? '—' : pct(added)} |`;
  const worst = Math.max(chatAdded, streamAdded);
  return `## Metrics (/internal/metrics)

The chat request, non-streaming and streaming (10 events), at concurrency 16 (autocannon, ${ROUNDS} alternating rounds of
${ROUND_S} s per gateway) to two gateways in front of the lean backend: **metrics off** (\`metrics.enabled: false\`: no
\`metrics\` step) and **metrics on** (the default: every request's duration, overhead, stream timings and counts filed;
the rest is read only when scraped). "CPU added" is the median over the rounds of the extra gateway CPU time per request.
After the load, one scrape of the "on" gateway: ${Math.round(text.length / 1024)} KiB, ${text.split('\n').filter((l) => l && !l.startsWith('#')).length} samples, ${counted} proxied requests in \`gw_request_duration_seconds\`.

| gateway | c16 req/s | CPU µs/req | CPU added |
|---|---|---|---|
${row('chat, metrics off', chatOff)}
${row('chat, metrics on', chatOn, chatAdded)}
${row('stream, metrics off', streamOff)}
${row('stream, metrics on', streamOn, streamAdded)}

| target (issue 11) | measured | verdict |
|---|---|---|
| metrics add at most 5% CPU per request | ${pct(worst)} (worst of the two) | ${worst <= 0.05 ? 'met' : 'NOT met'} |
`;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { port } = await forkReady('backend.js', ['0']);
  try {
    console.log(await metricsSection(port));
  } finally {
    stopAll();
  }
}
