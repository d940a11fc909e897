// Benchmarks, all in one run on this machine, each server in its own process on 127.0.0.1:
//  1. proxy path — (a) direct to a lean fake backend, (b) the floor pass-through proxy,
//     (c) the gateway: non-streaming chat at concurrency 1 and 64, streaming first byte and total;
//  2. model routing — the gateway with alias resolution and body rewrite against the gateway
//     with no body inspection, on a 2 KB and a 200 KB chat body.
// Results go to bench/RESULTS.md. Usage: npm run bench [-- --quick]
import { writeFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import { join } from 'node:path';
import { forkReady, here, load, round, sequential, startGateway, stopAll, streaming } from './lib.js';

const quick = process.argv.includes('--quick');
const DURATION = quick ? 3 : 10;
const SEQUENTIAL = quick ? 1000 : 5000;
const STREAMS = quick ? 100 : 300;

const chatBody = JSON.stringify({
  model: 'bench-model', stream: false, max_tokens: 64, temperature: 0.7,
  messages: [{ role: 'system', content: 'You are a helpful assistant.' }, { role: 'user', content: 'Say hello to the benchmark in one short sentence, please.' }],
});
const streamBody = chatBody.replace('"stream":false', '"stream":true');

/** A chat body of about `bytes`, messages first and the model last (as SDKs often order it). */
function sizedBody(bytes, model) {
  const turn = (i) => ({ role: i % 2 ? 'assistant' : 'user', content: `Turn ${i}: ${'lorem ipsum dolor sit amet, consectetur adipiscing elit. '.repeat(4)}` });
  const messages = [];
  while (JSON.stringify(messages).length < bytes - 80) messages.push(turn(messages.length));
  return JSON.stringify({ messages, temperature: 0.2, stream: false, model });
}

const endpointLines = (backendPort) => ['discovery:', '  static:', '    endpoints:', `      - { name: bench, type: pagedengine, url: "http://127.0.0.1:${backendPort}", check_interval: 5s }`];

const PLAIN_PROXY = `name: proxy
mount: { per_profile: true }
steps:
  - use: match-prefix
  - use: allowlist
  - use: read-body
  - use: select-endpoint
    with: { model_routing: false }
  - use: forward
  - use: upstream-headers
  - use: stats
  - use: access-log
`;

async function proxySection(backendPort) {
  const floorPort = await forkReady('floor-proxy.js', [`http://127.0.0.1:${backendPort}`, '0']);
  const gwPort = await startGateway(['logging: { level: info }', ...endpointLines(backendPort)]);
  const targets = {
    direct: [`http://127.0.0.1:${backendPort}`, '/v1/chat/completions'],
    floor: [`http://127.0.0.1:${floorPort}`, '/gw/pagedengine/v1/chat/completions'],
    gateway: [`http://127.0.0.1:${gwPort}`, '/gw/pagedengine/v1/chat/completions'],
  };
  const r = { direct: {}, floor: {}, gateway: {} };
  for (const [url, path] of Object.values(targets)) await load(url, path, chatBody, 64, 2); // warm-up
  const c1 = await sequential(Object.values(targets).map(([url, path]) => ({ url, path, body: chatBody })), SEQUENTIAL);
  Object.keys(targets).forEach((name, i) => (r[name].c1 = c1[i]));
  for (const [name, [url, path]] of Object.entries(targets)) r[name].c64 = await load(url, path, chatBody, 64, DURATION);
  for (const [name, [url, path]] of Object.entries(targets)) r[name].stream = await streaming(url, path, streamBody, STREAMS);
  const ratio = r.gateway.c64.rps / r.floor.c64.rps;
  const added = r.gateway.c1.p50_us - r.floor.c1.p50_us;
  const ttfb = r.gateway.stream.ttfb_p50_ms - r.direct.stream.ttfb_p50_ms;
  const row = (n, x) => `| ${n} | ${round(x.c1.p50_us, 0)} | ${round(x.c1.p99_us, 0)} | ${round(x.c1.rps, 0)} | ${round(x.c64.rps, 0)} | ${x.c64.p50_ms} | ${x.c64.p99_ms} | ${round(x.stream.ttfb_p50_ms, 2)} | ${round(x.stream.total_p50_ms, 2)} |`;
  return { raw: r, md: `## 1. Proxy path

- **direct** — the lean fake backend (bench/backend.js).
- **floor** — the simplest undici pass-through proxy (bench/floor-proxy.js), the floor for Node.
- **gateway** — \`gw serve\` with the built-in proxy pipeline (allowlist, body buffering, model routing,
  balancing, breaker-aware failover, headers both ways, stats, one info log line per request to a file).

Non-streaming chat (${chatBody.length}-byte body): concurrency 1 = ${SEQUENTIAL} sequential requests per target, one keep-alive
connection each, the three targets taking turns request by request; concurrency 64 = autocannon, ${DURATION} s. Streaming chat: ${STREAMS} sequential streams of 10 SSE events 2 ms apart.

| target | c1 p50 µs | c1 p99 µs | c1 req/s | c64 req/s | c64 p50 ms | c64 p99 ms | stream first byte p50 ms | stream total p50 ms |
|---|---|---|---|---|---|---|---|---|
${row('direct', r.direct)}
${row('floor', r.floor)}
${row('gateway', r.gateway)}

| target (issue 2) | measured | verdict |
|---|---|---|
| gateway req/s at c64 ≥ 70% of floor | ${round(ratio * 100, 1)}% | ${ratio >= 0.7 ? 'met' : 'NOT met'} |
| gateway p50 at c1 ≤ floor + 150 µs | ${added >= 0 ? '+' : ''}${round(added, 0)} µs | ${added <= 150 ? 'met' : 'NOT met'} |
| stream first byte ≤ direct + 2 ms | +${round(ttfb, 2)} ms | ${ttfb <= 2 ? 'met' : 'NOT met'} |
` };
}

async function routingSection(backendPort) {
  const plainPort = await startGateway(['logging: { level: info }', ...endpointLines(backendPort)], { 'proxy.yaml': PLAIN_PROXY });
  const routedPort = await startGateway(['logging: { level: info }', 'model_aliases: { bench-alias: [bench-model] }', ...endpointLines(backendPort)]);
  const path = '/gw/pagedengine/v1/chat/completions';
  const rows = [];
  let verdict = '';
  for (const size of [2048, 204800]) {
    const body = sizedBody(size, 'bench-alias');
    const n = size > 10_000 ? Math.ceil(SEQUENTIAL / 5) : SEQUENTIAL;
    const [plainC1, routedC1] = await sequential([plainPort, routedPort].map((port) => ({ url: `http://127.0.0.1:${port}`, path, body })), n);
    const plain = { c1: plainC1, c16: await load(`http://127.0.0.1:${plainPort}`, path, body, 16, DURATION) };
    const routed = { c1: routedC1, c16: await load(`http://127.0.0.1:${routedPort}`, path, body, 16, DURATION) };
    const c1 = routed.c1.mean_us / plain.c1.mean_us - 1;
    const c16 = plain.c16.rps / routed.c16.rps - 1;
    rows.push(`| ${round(body.length / 1024, 1)} KB | ${round(plain.c1.mean_us, 0)} | ${round(routed.c1.mean_us, 0)} | ${c1 >= 0 ? '+' : ''}${round(c1 * 100, 1)}% | ${round(plain.c16.rps, 0)} | ${round(routed.c16.rps, 0)} | ${c16 >= 0 ? '+' : ''}${round(c16 * 100, 1)}% |`);
    if (size === 2048) verdict = `| body inspection on the 2 KB body adds ≤ 10% per request | c1 ${c1 >= 0 ? '+' : ''}${round(c1 * 100, 1)}%, c16 ${c16 >= 0 ? '+' : ''}${round(c16 * 100, 1)}% | ${Math.max(c1, c16) <= 0.1 ? 'met' : 'NOT met'} |`;
  }
  return { md: `## 2. Model routing and alias rewrite

- **plain** — the gateway with a proxy pipeline that never looks into the body (no aliases, no model
  routing, no X-Gw-Model): the cost of proxying alone.
- **routed** — the built-in pipeline with \`model_aliases: { bench-alias: [bench-model] }\`: the body's model is
  found (byte scan, no full parse), the alias resolved through the catalogue, candidates filtered by model,
  and the body rewritten to \`bench-model\` on its way out.

Chat bodies with the messages first and \`"model": "bench-alias"\` last (the worst place for the scan).
c1 = mean time per request over sequential requests; c16 = autocannon with 16 connections, ${DURATION} s
(time per request = 1 / req/s).

| body | plain c1 µs | routed c1 µs | c1 added | plain c16 req/s | routed c16 req/s | c16 added |
|---|---|---|---|---|---|---|
${rows.join('\n')}

| target (issue 4) | measured | verdict |
|---|---|---|
${verdict}
` };
}

async function main() {
  const backendPort = await forkReady('backend.js', ['0']);
  const sections = [await proxySection(backendPort), await routingSection(backendPort)];
  const md = `# Benchmark results

Machine: ${cpus().length} × ${cpus()[0].model}, ${Math.round(totalmem() / 2 ** 30)} GiB, Node ${process.version}, ${new Date().toISOString().slice(0, 10)}.
Command: \`npm run bench\` (bench/run.js${quick ? ' --quick' : ''}). Backend, proxies and gateways each run in a process of
their own, the load generator in the bench process; all on 127.0.0.1; every figure below comes from this one run.

${sections.map((s) => s.md).join('\n')}`;
  writeFileSync(join(here, 'RESULTS.md'), md);
  console.log(md);
}

main()
  .catch((err) => {
    console.error(err);
    process.exitCode = 1;
  })
  .finally(stopAll);
