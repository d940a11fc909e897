// One GPU, many models (issue 34): a fake Ollama that holds one model at a time, serves in
// arrival order and takes SWITCH_MS to load another (engine/demo/gpu.ts), behind the gateway, with
// 8 clients sending the mixed pattern A B A A C A B C … Two workloads: each client waits for its
// answer before its next request (chat users), or sends one every INTERVAL_MS whatever the answers
// (agents and batch jobs: requests pile up while a model loads). Plain FIFO (the endpoint's queue
// in arrival order: the engine sees the models interleaved) against the queue served by model
// (model_switching): the switches the engine made, the total time, the slowest request, the
// longest a request waited for its model in the queue, and that every request was answered.
// Usage: npm run build && node bench/model-switching.js [--quick] (SWITCH_MS=5000 for the issue's 5 s).
import { Pool } from 'undici';
import { FakeBackend } from '../dist/engine/demo/index.js';
import { quick, round, startGateway, stopAll } from './lib.js';

const SWITCH_MS = Number(process.env.SWITCH_MS ?? (quick ? 500 : 2000));
/** How long the engine takes to answer once its model is loaded. */
const ANSWER_MS = 100;
const CLIENTS = 8;
const PER_CLIENT = quick ? 6 : 12;
const PATTERN = 'ABAACABCABACCABAAB';
const MODELS = { A: 'model-a', B: 'model-b', C: 'model-c' };
const MAX_WAIT = '20s';
const INTERVAL_MS = 250;
const WORKLOADS = [
  ['each client waits for its answer', false],
  [`each client sends every ${INTERVAL_MS} ms`, true],
];

const CONFIGS = [
  ['plain FIFO', ''],
  ['served by model', `, model_switching: { models_at_once: 1, max_wait: ${MAX_WAIT}, min_dwell: 2s }`],
];

async function run(name, extra, fake, open) {
  const gw = await startGateway([
    'logging: { level: warn }',
    'discovery:',
    '  static:',
    '    endpoints:',
    `      - { name: gpu, type: ollama, url: "${fake.url}", check_interval: 60s${extra} }`,
  ]);
  const base = `http://127.0.0.1:${gw.port}`;
  const pool = new Pool(base, { connections: open ? CLIENTS * PER_CLIENT : CLIENTS });
  fake.gpu.switches = 0;
  const statuses = {};
  let slowest = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: CLIENTS }, async (_, client) => {
      const sent = [];
      for (let k = 0; k < PER_CLIENT; k++) {
        const model = MODELS[PATTERN[(client * 5 + k) % PATTERN.length]];
        const one = ask(pool, model, `client ${client} turn ${k}`).then((r) => {
          slowest = Math.max(slowest, r.ms);
          statuses[r.status] = (statuses[r.status] ?? 0) + 1;
        });
        if (!open) await one;
        else {
          sent.push(one);
          await new Promise((r) => setTimeout(r, INTERVAL_MS));
        }
      }
      await Promise.all(sent);
    }),
  );
  const total = performance.now() - started;
  const status = await (await fetch(`${base}/internal/status/endpoints`)).json();
  const queue = status.endpoints[0].queue;
  await pool.close();
  process.kill(gw.pid);
  return { name, switches: fake.gpu.switches, total, slowest, statuses, longestWait: queue?.model_switching?.longest_wait ?? '—' };
}

async function ask(pool, model, content) {
  const t = performance.now();
  const res = await pool.request({
    path: '/gw/ollama/v1/chat/completions',
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model, messages: [{ role: 'user', content }] }),
  });
  await res.body.dump();
  return { status: res.statusCode, ms: performance.now() - t };
}

export async function modelSwitchingSection() {
  const fake = await new FakeBackend({
    family: 'localrunner',
    name: 'one-gpu',
    models: Object.values(MODELS).map((name) => ({ name })),
    modelsAtOnce: 1,
    switchMs: SWITCH_MS,
  }).start();
  fake.behaviour.delayMs = ANSWER_MS;
  try {
    const tables = [];
    for (const [workload, open] of WORKLOADS) {
      const [fifo, turns] = [await run(CONFIGS[0][0], CONFIGS[0][1], fake, open), await run(CONFIGS[1][0], CONFIGS[1][1], fake, open)];
      tables.push(`**${workload}**

| queue | switches | total | slowest request | longest queue wait | answers |
|---|---|---|---|---|---|
${line(fifo)}
${line(turns)}

Switches ${round(fifo.switches / Math.max(1, turns.switches), 1)}× fewer; total time ${round(fifo.total / turns.total, 2)}× shorter.`);
    }
    return `## One GPU, many models

${CLIENTS} clients, ${PER_CLIENT} requests each, models in the pattern ${PATTERN.split('').join(' ')} (each client starting
elsewhere in it), to a fake Ollama that holds one model at a time, serves in arrival order, takes ${SWITCH_MS} ms to switch and
${ANSWER_MS} ms to answer. "Served by model": \`model_switching: { models_at_once: 1, max_wait: ${MAX_WAIT}, min_dwell: 2s }\`.

${tables.join('\n\n')}
`;
  } finally {
    await fake.stop();
  }
}

function line(r) {
  return `| ${r.name} | ${r.switches} | ${round(r.total / 1000, 1)} s | ${round(r.slowest / 1000, 1)} s | ${r.longestWait} | ${Object.entries(r.statuses)
    .map(([s, n]) => `${n}× ${s}`)
    .join(', ')} |`;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  try {
    console.log(await modelSwitchingSection());
  } finally {
    stopAll();
  }
}
