// Benchmarks, all in one run on this machine, each server in its own process on 127.0.0.1:
//  1. proxy path — (a) direct to a lean fake backend, (b) the floor pass-through proxy,
//     (c) the gateway: non-streaming chat at concurrency 1 and 64, streaming first byte and total;
//  2. model routing — the gateway with alias resolution and body rewrite against the gateway
//     with no body inspection, on a 2 KB and a 200 KB chat body;
//  3. messages API and Responses API translation — the same chat request as a messages request and
//     as a Responses request, translated both ways, against plain proxying, streaming and not, at
//     concurrency 16, and counted by callgrind against the messages translation before issue 21;
//  4. hot reload — pipeline edits under load: how long each takes to show, and no failed request;
//  5. per-endpoint concurrency — the cost of a limit that is not reached, and of queueing;
//  metrics (bench/metrics.js) — the cost of /internal/metrics per request, on against off;
//  limits (bench/limits.js) — rate limits that are never reached, on against off;
//  shared limits (bench/shared-limits.js) — the same limits kept in Redis against in memory;
//  failover (bench/failover.js) — a request that needs no retry, against the builds before issues 12, 17, 18, 19 and 20;
//  affinity (bench/affinity.js) — later turns' time to first token with conversation affinity against plain balancing;
//  model switching (bench/model-switching.js) — one GPU, many models: the queue served by model against arrival order;
//  against the floor (bench/floor.js) — instructions per request of the gateway ÷ the floor proxy's, under callgrind.
// "Time per request" in the A/B comparisons is the CPU time the gateway process spends per request
// (from /proc, over alternating load rounds): unlike req/s on a two-core machine shared by four busy
// processes, it does not depend on how the scheduler mixes them.
// Results go to bench/RESULTS.md. Usage: npm run bench [-- --quick]
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { metricsSection } from './metrics.js';
import { limitsSection } from './limits.js';
import { failoverSection } from './failover.js';
import { affinitySection } from './affinity.js';
import { modelSwitchingSection } from './model-switching.js';
import { translationInstructions } from './translation.js';
import { sharedLimitsSection } from './shared-limits.js';
import { workersSection } from './workers.js';
import { streamsSection } from './streams.js';
import { floorSection } from './floor.js';
import {
  cpuAdded,
  timeAdded,
  forkReady,
  here,
  load,
  loadAlternating,
  pairedAdded,
  round,
  sequential,
  startGateway,
  stopAll,
  streaming,
  quick,
  ROUNDS,
  ROUND_S,
  pct,
  chatBody,
  streamBody,
  endpointLines,
} from './lib.js';

const DURATION = quick ? 3 : 10;
const SEQUENTIAL = quick ? 1000 : 5000;
const STREAMS = quick ? 100 : 300;

/** A chat body of about `bytes`, messages first and the model last (as SDKs often order it). */
function sizedBody(bytes, model) {
  const turn = (i) => ({ role: i % 2 ? 'assistant' : 'user', content: `Turn ${i}: ${'lorem ipsum dolor sit amet, consectetur adipiscing elit. '.repeat(4)}` });
  const messages = [];
  while (JSON.stringify(messages).length < bytes - 80) messages.push(turn(messages.length));
  return JSON.stringify({ messages, temperature: 0.2, stream: false, model });
}

// The built-in proxy pipeline with every step that reads the body removed or told not to.
const PLAIN_PROXY = `name: proxy
mount: { per_profile: true }
steps:
  - use: cors
  - use: match-prefix
  - use: allowlist
  - use: intercept-models
  - use: read-body
  - use: select-endpoint
    with: { model_routing: false }
  - use: upstream-headers
  - use: forward
  - use: gateway-headers
    with: { model_header: false }
  - use: stats
    with: { per_model: false }
  - use: access-log
`;

async function proxySection(backendPort) {
  const floor = await forkReady('floor-proxy.js', [`http://127.0.0.1:${backendPort}`, '0']);
  const gw = await startGateway(['logging: { level: info }', ...endpointLines(backendPort)]);
  const targets = {
    direct: { url: `http://127.0.0.1:${backendPort}`, path: '/v1/chat/completions' },
    floor: { url: `http://127.0.0.1:${floor.port}`, path: '/gw/pagedengine/v1/chat/completions', pid: floor.pid },
    gateway: { url: `http://127.0.0.1:${gw.port}`, path: '/gw/pagedengine/v1/chat/completions', pid: gw.pid },
  };
  const r = { direct: {}, floor: {}, gateway: {} };
  for (const t of Object.values(targets)) await load(t.url, t.path, chatBody, 64, 2); // warm-up
  const c1 = await sequential(
    Object.values(targets).map((t) => ({ ...t, body: chatBody })),
    SEQUENTIAL,
  );
  Object.keys(targets).forEach((name, i) => (r[name].c1 = c1[i]));
  for (const [name, t] of Object.entries(targets)) r[name].c64 = await load(t.url, t.path, chatBody, 64, DURATION, t.pid);
  for (const [name, t] of Object.entries(targets)) r[name].stream = await streaming(t.url, t.path, streamBody, STREAMS);
  const ratio = r.gateway.c64.rps / r.floor.c64.rps;
  const added = r.gateway.c1.p50_us - r.floor.c1.p50_us;
  const ttfb = r.gateway.stream.ttfb_p50_ms - r.direct.stream.ttfb_p50_ms;
  const cpu = (x) => (x.c64.cpu_us === undefined ? '—' : round(x.c64.cpu_us, 0));
  const row = (n, x) =>
    `| ${n} | ${round(x.c1.p50_us, 0)} | ${round(x.c1.p99_us, 0)} | ${round(x.c64.rps, 0)} | ${x.c64.p50_ms} | ${x.c64.p99_ms} | ${cpu(x)} | ${round(x.stream.ttfb_p50_ms, 2)} | ${round(x.stream.total_p50_ms, 2)} |`;
  return `## 1. Proxy path

- **direct** — the lean fake backend (bench/backend.js).
- **floor** — the simplest undici pass-through proxy (bench/floor-proxy.js), the floor for Node.
- **gateway** — \`gw serve\` with the built-in proxy pipeline (CORS, allowlist, body buffering, model routing,
  balancing, breaker-aware failover, headers both ways, stats, one info log line per request to a file).

Non-streaming chat (${chatBody.length}-byte body): concurrency 1 = ${SEQUENTIAL} sequential requests per target, one keep-alive
connection each, the three targets taking turns request by request; concurrency 64 = autocannon, ${DURATION} s, with the CPU
time the proxy process spent per request. Streaming chat: ${STREAMS} sequential streams of 10 SSE events 2 ms apart.

| target | c1 p50 µs | c1 p99 µs | c64 req/s | c64 p50 ms | c64 p99 ms | CPU µs/request | stream first byte p50 ms | stream total p50 ms |
|---|---|---|---|---|---|---|---|---|
${row('direct', r.direct)}
${row('floor', r.floor)}
${row('gateway', r.gateway)}

| target (issue 2) | measured | verdict |
|---|---|---|
| gateway req/s at c64 ≥ 70% of floor | ${round(ratio * 100, 1)}% | ${ratio >= 0.7 ? 'met' : 'NOT met'} |
| gateway p50 at c1 ≤ floor + 150 µs | ${added >= 0 ? '+' : ''}${round(added, 0)} µs | ${added <= 150 ? 'met' : 'NOT met'} |
| stream first byte ≤ direct + 2 ms | +${round(ttfb, 2)} ms | ${ttfb <= 2 ? 'met' : 'NOT met'} |
`;
}

async function routingSection(backendPort) {
  const plainGw = await startGateway(['logging: { level: info }', ...endpointLines(backendPort)], { 'proxy.yaml': PLAIN_PROXY });
  const routedGw = await startGateway(['logging: { level: info }', 'model_aliases: { bench-alias: [bench-model] }', ...endpointLines(backendPort)]);
  const path = '/gw/pagedengine/v1/chat/completions';
  const rows = [];
  let verdict = '';
  for (const size of [2048, 204800]) {
    const body = sizedBody(size, 'bench-alias');
    const targets = [plainGw, routedGw].map((g) => ({ url: `http://127.0.0.1:${g.port}`, path, body, pid: g.pid }));
    const [plainC1, routedC1] = await sequential(targets, size > 10_000 ? Math.ceil(SEQUENTIAL / 5) : SEQUENTIAL);
    const [plain, routed] = await loadAlternating(targets, 16, ROUNDS, ROUND_S);
    const c1 = pairedAdded(plainC1, routedC1);
    const cpu = cpuAdded(plain, routed);
    const wall = timeAdded(plain, routed);
    rows.push(
      `| ${round(body.length / 1024, 1)} KB | ${round(plainC1.p50_us, 0)} | ${round(routedC1.p50_us, 0)} | ${pct(c1)} | ${round(plain.rps, 0)} | ${round(routed.rps, 0)} | ${pct(wall)} | ${round(plain.cpu_us, 0)} | ${round(routed.cpu_us, 0)} | ${pct(cpu)} |`,
    );
    if (size === 2048) {
      verdict = `| body inspection on the 2 KB body adds ≤ 10% to the time per request (c1 latency; c16 wall time) | ${pct(c1)}; ${pct(wall)} | ${Math.max(c1, wall) <= 0.1 ? 'met' : 'NOT met'} |
| the same, as gateway CPU time per request (stricter; for the record) | ${pct(cpu)} | ${cpu <= 0.1 ? 'met' : 'not met'} |`;
    }
  }
  return `## 2. Model routing and alias rewrite

- **plain** — the built-in proxy pipeline with the steps that read the body removed (alias-resolve,
  rewrite-model) or told not to (model routing, X-Gw-Model, per-model stats): the cost of proxying alone.
- **routed** — the built-in pipeline with \`model_aliases: { bench-alias: [bench-model] }\`: the body's model is
  found (byte scan, no full parse), the alias resolved through the catalogue, candidates filtered by model,
  and the body rewritten to \`bench-model\` on its way out.

Chat bodies with the messages first and \`"model": "bench-alias"\` last (the worst place for the scan).
c1 = sequential requests, the two gateways taking turns; "added" is the median of the paired differences (each
routed request minus the plain one just before it) over the plain median. c16 = autocannon with 16 connections,
${ROUNDS} alternating rounds of ${ROUND_S} s per gateway after a warm-up round; "c16 time added" is the median over the
rounds of the extra wall time per request (1 / req/s), "CPU added" the same for each gateway's own CPU time per request
(read from /proc: it does not depend on how the scheduler shares two cores among four busy processes).

| body | plain c1 p50 µs | routed c1 p50 µs | c1 added | plain c16 req/s | routed c16 req/s | c16 time added | plain CPU µs/req | routed CPU µs/req | CPU added |
|---|---|---|---|---|---|---|---|---|---|
${rows.join('\n')}

| target (issue 4) | measured | verdict |
|---|---|---|
${verdict}
`;
}

async function translationSection(backendPort) {
  // mlxsingle has neither the messages API nor the Responses API, so both are translated. Its profile
  // runs one request at a time; the limit is lifted here, so this measures translation, not a queue.
  const gw = await startGateway(['logging: { level: info }', ...endpointLines(backendPort, 'mlxsingle', ', max_concurrent_requests: 0')]);
  const url = `http://127.0.0.1:${gw.port}`;
  const ask = 'Say hello to the benchmark in one short sentence, please.';
  const system = 'You are a helpful assistant.';
  const rows = [];
  const verdicts = [];
  for (const stream of [false, true]) {
    const plain = JSON.stringify({
      model: 'bench-model',
      stream,
      max_tokens: 64,
      temperature: 0.7,
      messages: [
        { role: 'system', content: system },
        { role: 'user', content: ask },
      ],
    });
    const messages = JSON.stringify({ model: 'bench-model', stream, max_tokens: 64, temperature: 0.7, system, messages: [{ role: 'user', content: ask }] });
    const responses = JSON.stringify({ model: 'bench-model', stream, max_output_tokens: 64, temperature: 0.7, instructions: system, input: ask });
    const [a, b, c] = await loadAlternating(
      [
        { url, path: '/gw/mlxsingle/v1/chat/completions', body: plain, pid: gw.pid },
        { url, path: '/gw/msgapi/v1/messages', body: messages, pid: gw.pid },
        { url, path: '/gw/openai/v1/responses', body: responses, pid: gw.pid },
      ],
      16,
      ROUNDS,
      ROUND_S,
    );
    const kind = stream ? 'streaming (10 SSE events)' : 'non-streaming';
    for (const [api, t] of [
      ['messages', b],
      ['Responses', c],
    ]) {
      const cpu = cpuAdded(a, t);
      const wall = timeAdded(a, t);
      rows.push(`| ${kind}, ${api} | ${round(a.rps, 0)} | ${round(t.rps, 0)} | ${pct(wall)} | ${round(a.cpu_us, 0)} | ${round(t.cpu_us, 0)} | ${pct(cpu)} |`);
      if (api === 'messages')
        verdicts.push(
          `| translation adds ≤ 20% to the time per request at c16, ${kind} | ${pct(wall)} (CPU ${pct(cpu)}) | ${wall <= 0.2 ? 'met' : 'NOT met'} |`,
        );
    }
  }
  return `## 3. Messages API and Responses API translation

The same chat request at concurrency 16 (autocannon, ${ROUNDS} alternating rounds of ${ROUND_S} s per kind) to one gateway in front
of the lean backend registered as \`mlxsingle\` (no native messages or Responses API, so every such request is translated; its one-at-a-time limit lifted with \`max_concurrent_requests: 0\`):
**plain** — \`POST /gw/mlxsingle/v1/chat/completions\` proxied as is; **translated** — the equivalent
\`POST /gw/msgapi/v1/messages\` or \`POST /gw/openai/v1/responses\`, translated to chat-completions and its reply (or stream) translated back.
"Time per request added" is the median over the rounds of the extra wall time per request at c16 (16 / req/s);
"CPU added" the same for the gateway's own CPU time per request.

| request | plain req/s | translated req/s | time per request added | plain CPU µs/req | translated CPU µs/req | CPU added |
|---|---|---|---|---|---|---|
${rows.join('\n')}

| target (issue 5) | measured | verdict |
|---|---|---|
${verdicts.join('\n')}

${await translationInstructions(backendPort)}`;
}

async function queueSection(backendPort) {
  const path = '/gw/pagedengine/v1/chat/completions';
  const none = await startGateway(['logging: { level: info }', ...endpointLines(backendPort)]);
  const roomy = await startGateway(['logging: { level: info }', ...endpointLines(backendPort, 'pagedengine', ', max_concurrent_requests: 1000')]);
  const tight = await startGateway([
    'logging: { level: info }',
    ...endpointLines(backendPort, 'pagedengine', ', max_concurrent_requests: 4, max_queued_requests: 64'),
  ]);
  const targets = [none, roomy, tight].map((g) => ({ url: `http://127.0.0.1:${g.port}`, path, body: chatBody, pid: g.pid }));
  const [a, b, c] = await loadAlternating(targets, 16, ROUNDS, ROUND_S);
  const roomyCpu = cpuAdded(a, b);
  const tightCpu = cpuAdded(a, c);
  const row = (name, x, added) => `| ${name} | ${round(x.rps, 0)} | ${round(x.cpu_us, 0)} | ${added === undefined ? '—' : pct(added)} |`;
  return `## 5. Per-endpoint concurrency limit

The chat request at concurrency 16 (autocannon, ${ROUNDS} alternating rounds of ${ROUND_S} s per gateway) to three gateways in
front of the lean backend: **no limit** (the pagedengine profile sets none); **limit 1000** (\`max_concurrent_requests: 1000\`,
never reached: the cost of admission alone, a slot taken and given back per request); **limit 4** (\`max_concurrent_requests: 4\`,
so 12 of the 16 requests wait in the FIFO queue at any time: the cost of queueing). "CPU added" is the median over the rounds of
the extra gateway CPU time per request against no limit.

| gateway | c16 req/s | CPU µs/req | CPU added |
|---|---|---|---|
${row('no limit', a)}
${row('limit 1000 (never reached)', b, roomyCpu)}
${row('limit 4 (queueing)', c, tightCpu)}

| target (issue 10) | measured | verdict |
|---|---|---|
| a limit that is not reached costs ≤ 2% CPU per request | ${pct(roomyCpu)} | ${roomyCpu <= 0.02 ? 'met' : 'NOT met'} |
`;
}

const TAG_PLUGIN = `export default { name: 'tag', schema: { type: 'object', properties: { value: { type: 'string' } } },
  apply(hooks, o) { hooks.respond.tap('tag', (ctx) => ctx.replyHeaders.push('x-tag', o.value)); } };
`;

async function reloadSection(backendPort) {
  const plugin = join(mkdtempSync(join(tmpdir(), 'gw-bench-plugin-')), 'tag.mjs');
  writeFileSync(plugin, TAG_PLUGIN);
  const gw = await startGateway(['logging: { level: warn }', `plugins: [${plugin}]`, ...endpointLines(backendPort)]);
  const url = `http://127.0.0.1:${gw.port}`;
  const path = '/gw/pagedengine/v1/chat/completions';
  const proxy = readFileSync(join(here, '../pipelines/proxy.yaml'), 'utf8');
  const edits = quick ? 4 : 8;
  // The load runs for as long as the edits take; each edit waits for its effect, then a pause.
  const running = load(url, path, chatBody, 16, edits * 1.2 + 2, gw.pid).catch((err) => ({ error: err.message }));
  await new Promise((r) => setTimeout(r, 1000));
  const took = [];
  for (let i = 0; i < edits; i++) {
    const value = `v${i}`;
    const t0 = performance.now();
    writeFileSync(join(gw.pipelineDir, 'proxy.yaml'), proxy.replace('  - use: forward', `  - use: forward\n  - use: tag\n    with: { value: ${value} }`));
    for (let seen = ''; seen !== value; ) {
      const res = await fetch(url + path, { method: 'POST', headers: { 'content-type': 'application/json' }, body: chatBody });
      await res.arrayBuffer();
      seen = res.headers.get('x-tag') ?? '';
    }
    took.push(performance.now() - t0);
    await new Promise((r) => setTimeout(r, 1000));
  }
  const loadResult = await running;
  const sorted = [...took].sort((a, b) => a - b);
  const max = sorted.at(-1);
  const failedLoad = 'error' in loadResult;
  return `## 4. Hot reload under load

The built-in proxy pipeline edited ${edits} times (a step added, then its option changed) while autocannon sends the
chat request at concurrency 16; each edit counts from the file write to the first reply that shows it. The load
fails the run on any non-2xx reply or error.

| edits | effect p50 ms | effect max ms | load req/s | load errors |
|---|---|---|---|---|
| ${edits} | ${round(sorted[Math.floor(sorted.length / 2)], 0)} | ${round(max, 0)} | ${failedLoad ? '—' : round(loadResult.rps, 0)} | ${failedLoad ? loadResult.error : 'none'} |

| target (issue 9) | measured | verdict |
|---|---|---|
| every change takes effect within 1 s | max ${round(max, 0)} ms | ${max <= 1000 ? 'met' : 'NOT met'} |
| no request fails during reloads | ${failedLoad ? loadResult.error : 'none failed'} | ${failedLoad ? 'NOT met' : 'met'} |
`;
}

/** `--only translation`: that section measured again and put in place of its old figures in
 *  RESULTS.md, saying so (the other sections keep the run they came from). */
async function only(name) {
  const { port: backendPort } = await forkReady('backend.js', ['0']);
  const sections = {
    translation: [translationSection, '## 3.'],
    'shared-limits': [sharedLimitsSection, '## Rate limits shared through Redis'],
    workers: [workersSection, '## Workers'],
    streams: [streamsSection, '## Streams'],
    'model-switching': [modelSwitchingSection, '## One GPU, many models'],
    floor: [floorSection, '## Against the floor, in instructions'],
  };
  if (!sections[name]) throw new Error(`--only takes one of: ${Object.keys(sections).join(', ')}`);
  const [run, heading] = sections[name];
  const text = `${await run(backendPort)}
(This section measured again on ${new Date().toISOString().slice(0, 10)} with \`npm run bench -- --only ${name}\`${quick ? ' --quick' : ''}, on ${cpus().length} × ${cpus()[0].model}; the others come from the run above.)
`;
  const path = join(here, 'RESULTS.md');
  const md = readFileSync(path, 'utf8');
  const start = md.indexOf(heading);
  const end = start < 0 ? -1 : md.indexOf('\n## ', start + heading.length);
  // A section the last full run did not have goes at the end.
  writeFileSync(path, start < 0 ? `${md.trimEnd()}\n\n${text}` : md.slice(0, start) + text + (end < 0 ? '' : md.slice(end)));
  console.log(text);
}

/** What was measured by hand rather than by this script: kept as it is when a full run rewrites the file. */
const BY_HAND = '## Measured by hand';
function byHand() {
  const md = readFileSync(join(here, 'RESULTS.md'), 'utf8');
  const start = md.indexOf(BY_HAND);
  if (start < 0) return '';
  const end = md.indexOf('\n## ', start + BY_HAND.length);
  return `\n${md.slice(start, end < 0 ? undefined : end).trimEnd()}\n`;
}

async function main() {
  const o = process.argv.indexOf('--only');
  if (o > 0) return only(process.argv[o + 1]);
  const { port: backendPort } = await forkReady('backend.js', ['0']);
  const sections = [
    await proxySection(backendPort),
    await floorSection(backendPort),
    await routingSection(backendPort),
    await translationSection(backendPort),
    await reloadSection(backendPort),
    await queueSection(backendPort),
    await metricsSection(backendPort),
    await limitsSection(backendPort),
    await sharedLimitsSection(backendPort),
    await workersSection(backendPort),
    await streamsSection(backendPort),
    await failoverSection(backendPort),
    await affinitySection(),
    await modelSwitchingSection(),
  ];
  const md = `# Benchmark results

Machine: ${cpus().length} × ${cpus()[0].model}, ${Math.round(totalmem() / 2 ** 30)} GiB, Node ${process.version}, ${new Date().toISOString().slice(0, 10)}.
Command: \`npm run bench\` (bench/run.js${quick ? ' --quick' : ''}). Backend, proxies and gateways each run in a process of
their own, the load generator in the bench process; all on 127.0.0.1; every figure below comes from this one run.

${sections.join('\n')}${byHand()}`;
  writeFileSync(join(here, 'RESULTS.md'), md);
  console.log(md);
}

main()
  .catch((err) => {
    console.error(err);
    process.exitCode = 1;
  })
  .finally(stopAll);
