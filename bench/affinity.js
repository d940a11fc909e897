// Conversation affinity against plain balancing. Multi-turn conversations go through the gateway
// to four fake llama.cpp backends (bench/prefix-backends.js) whose prefill costs 0.05 ms per prompt
// token not in their prefix cache, one prompt at a time per backend: an uncached 8k-token prompt
// takes about 400 ms. Each conversation opens with its own ~8k-token system prompt; each turn adds a
// user message, and the reply as the assistant's. Clients run their conversations' turns in
// sequence, several clients at once, with a user's think time between turns (0-300 ms, the same in
// every run; without it the clients move in lock-step and round-robin keeps each conversation on one
// backend by accident). Measured at the client: time to the first content chunk.
// One gateway per configuration, the same backends, their caches emptied between runs.
// Usage: npm run build && node bench/affinity.js [--quick]: prints the section; `npm run bench` puts it in RESULTS.md.
import { fork, spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Pool } from 'undici';
import { here, quick, round, startGateway, stopAll } from './lib.js';

const CONVERSATIONS = quick ? 12 : 32;
const TURNS = quick ? 3 : 4;
const CLIENTS = quick ? 4 : 8;
const BACKENDS = 4;
const MS_PER_TOKEN = 0.05;
/** About 8k tokens at the fakes' 4 characters a token. */
const SYSTEM_CHARS = 32 * 1024;
const PATH = '/gw/cppengine/v1/chat/completions';

const AFFINITY = 'round-robin + affinity';
const CONFIGS = [
  [AFFINITY, '{ load_balancer: round-robin, affinity: { enabled: true } }'],
  ['round-robin + affinity, max_load_factor 2', '{ load_balancer: round-robin, affinity: { enabled: true, max_load_factor: 2 } }'],
  ['round-robin', '{ load_balancer: round-robin, affinity: { enabled: false } }'],
  ['least-connections', '{ load_balancer: least-connections, affinity: { enabled: false } }'],
  ['p2c', '{ load_balancer: p2c, affinity: { enabled: false } }'],
];

const WORDS =
  'amber basin cedar delta ember fjord glade harbor inlet juniper kestrel lagoon meadow nectar orchard prairie quartz ridge sierra tundra upland valley willow xenon yarrow zephyr anchor beacon canyon dune estuary forest'.split(
    ' ',
  );

/** Numbers in [0, 1), the same for the same seed (mulberry32). */
function random(seed) {
  let s = seed * 0x9e3779b9;
  return () => {
    s = (s + 0x6d2b79f5) | 0;
    let t = Math.imul(s ^ (s >>> 15), 1 | s);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
  };
}

/** Text of about `chars` characters, distinct per seed from its first word. */
function text(seed, chars) {
  const next = random(seed);
  const words = [];
  for (let n = 0; n < chars; n += words.at(-1).length + 1) words.push(WORDS[Math.floor(next() * WORDS.length)]);
  return words.join(' ');
}

/** The backends' process: { ports, reset(), stop() }. */
async function startBackends() {
  const child = fork(join(here, 'prefix-backends.js'), [String(BACKENDS), String(MS_PER_TOKEN)], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const ask = (message) =>
    new Promise((resolve, reject) => {
      const exited = (code) => reject(new Error(`prefix-backends.js exited ${code} (did you run npm run build?)`));
      child.once('exit', exited);
      child.once('message', (m) => {
        child.off('exit', exited);
        resolve(m);
      });
      if (message) child.send(message);
    });
  const { ports } = await ask();
  return { ports, reset: () => ask('reset'), stop: () => child.kill() };
}

const configLines = (ports, proxy) => [
  'logging: { level: warn }',
  `proxy: ${proxy}`,
  'discovery:',
  '  static:',
  '    endpoints:',
  ...ports.map((p, i) => `      - { name: backend-${i}, type: cppengine, url: "http://127.0.0.1:${p}", check_interval: 2s }`),
];

/** `gw validate` on the configuration: null when it passes, else its FAIL lines (a key or
 *  balancer this build does not know). */
function invalid(lines) {
  const file = join(mkdtempSync(join(tmpdir(), 'gw-affinity-')), 'config.yaml');
  writeFileSync(file, lines.join('\n'));
  const r = spawnSync(process.execPath, [join(here, '../bin/gw.js'), 'validate', '--config', file], { encoding: 'utf8' });
  return r.status === 0
    ? null
    : (r.stdout + r.stderr)
        .split('\n')
        .filter((l) => /FAIL|rror/.test(l))
        .join('; ') || `gw validate exited ${r.status}`;
}

/** Poll the status route until every endpoint is routable (bounded). */
async function ready(port) {
  for (let i = 0; i < 200; i++) {
    const status = await (await fetch(`http://127.0.0.1:${port}/internal/status/endpoints`)).json();
    if (status.routable === BACKENDS) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error('the endpoints never became routable');
}

/** One streamed turn: time to the first content chunk, the reply, and what the backend found cached. */
async function turn(pool, messages) {
  const started = performance.now();
  const res = await pool.request({
    path: PATH,
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'test-model', stream: true, messages }),
  });
  if (res.statusCode !== 200) throw new Error(`${PATH} answered ${res.statusCode}: ${await res.body.text()}`);
  res.body.setEncoding('utf8');
  let ttft,
    content = '',
    timings,
    buffer = '';
  for await (const chunk of res.body) {
    buffer += chunk;
    for (let end = buffer.indexOf('\n\n'); end >= 0; end = buffer.indexOf('\n\n')) {
      const event = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      if (!event.startsWith('data: {')) continue;
      const data = JSON.parse(event.slice(6));
      const delta = data.choices?.[0]?.delta?.content;
      if (delta) {
        ttft ??= performance.now() - started;
        content += delta;
      }
      timings = data.timings ?? timings;
    }
  }
  return {
    ttft,
    content,
    cached: timings?.cache_n ?? 0,
    evaluated: timings?.prompt_n ?? 0,
    endpoint: res.headers['x-gw-endpoint'],
    affinity: res.headers['x-gw-affinity'],
  };
}

/** Every conversation, CLIENTS at a time, each client running its conversations' turns in order. */
async function workload(port) {
  const pool = new Pool(`http://127.0.0.1:${port}`, { connections: CLIENTS });
  for (let i = 0; i < BACKENDS; i++) await turn(pool, [{ role: 'user', content: `warm-up ${i}` }]);
  const results = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: CLIENTS }, async () => {
      for (let c = next++; c < CONVERSATIONS; c = next++) {
        const messages = [{ role: 'system', content: text(c + 1, SYSTEM_CHARS) }];
        const think = random(-(c + 1));
        for (let t = 1; t <= TURNS; t++) {
          await new Promise((r) => setTimeout(r, think() * 300));
          messages.push({ role: 'user', content: `Question ${t}: ${text(1000 * (c + 1) + t, 200)}?` });
          const r = await turn(pool, messages);
          messages.push({ role: 'assistant', content: r.content });
          results.push({ turn: t, ...r });
        }
      }
    }),
  );
  await pool.close();
  return results;
}

const percentile = (values, p) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.max(0, Math.ceil((p / 100) * sorted.length) - 1)];
};

function summary(results) {
  const later = results.filter((r) => r.turn >= 2);
  const first = results.filter((r) => r.turn === 1);
  const perEndpoint = Array.from({ length: BACKENDS }, (_, i) => results.filter((r) => r.endpoint === `backend-${i}`).length);
  const affinity = {};
  for (const r of results) if (r.affinity) affinity[r.affinity.split(' ')[0]] = (affinity[r.affinity.split(' ')[0]] ?? 0) + 1;
  return {
    later50: percentile(
      later.map((r) => r.ttft),
      50,
    ),
    later90: percentile(
      later.map((r) => r.ttft),
      90,
    ),
    first50: percentile(
      first.map((r) => r.ttft),
      50,
    ),
    first90: percentile(
      first.map((r) => r.ttft),
      90,
    ),
    cachedShare: later.filter((r) => r.cached > r.evaluated).length / later.length,
    perEndpoint,
    busiest: Math.max(...perEndpoint) / (results.length / BACKENDS),
    affinity:
      Object.entries(affinity)
        .map(([k, n]) => `${k} ${n}`)
        .join(', ') || '—',
  };
}

/** The section of bench/RESULTS.md. */
export async function affinitySection() {
  const backends = await startBackends();
  const rows = [];
  const skipped = [];
  try {
    for (const [name, proxy] of CONFIGS) {
      const lines = configLines(backends.ports, proxy);
      const why = invalid(lines);
      if (why) {
        skipped.push(`- **${name}** skipped: this build's gateway does not accept \`proxy: ${proxy}\` (${why}).`);
        continue;
      }
      await backends.reset();
      let gw;
      try {
        gw = await startGateway(lines);
      } catch (err) {
        skipped.push(`- **${name}** skipped: ${err.message}.`);
        continue;
      }
      try {
        await ready(gw.port);
        rows.push({ name, ...summary(await workload(gw.port)) });
      } finally {
        process.kill(gw.pid);
      }
    }
  } finally {
    backends.stop();
  }
  const base = rows.find((r) => r.name === AFFINITY);
  const ms = (x) => round(x, 0);
  const ratios = base
    ? rows.filter((r) => r !== base).map((r) => `Later-turn median TTFT, ${r.name} ÷ ${AFFINITY}: ${round(r.later50 / base.later50, 1)}×`)
    : [];
  return `## Conversation affinity (issue 20)

${CONVERSATIONS} conversations × ${TURNS} turns, ${CLIENTS} at a time, streamed through the gateway to ${BACKENDS} fake llama.cpp
backends (prefill ${MS_PER_TOKEN} ms per uncached token, one prompt at a time per backend; each conversation opens with its
own ~8k-token system prompt). TTFT: time to the first content chunk at the client, in ms. "Mostly cached": later turns
whose backend found more of the prompt cached than it evaluated (the reply's timings.cache_n against prompt_n).

| configuration | later turns TTFT p50 | p90 | mostly cached | first turns TTFT p50 | p90 | requests per endpoint | busiest / mean | X-Gw-Affinity | later p50 ÷ affinity's |
|---|---|---|---|---|---|---|---|---|---|
${rows.map((r) => `| ${r.name} | ${ms(r.later50)} | ${ms(r.later90)} | ${round(r.cachedShare * 100, 0)} % | ${ms(r.first50)} | ${ms(r.first90)} | ${r.perEndpoint.join(' / ')} | ${round(r.busiest, 2)} | ${r.affinity} | ${base ? round(r.later50 / base.later50, 1) : '—'} |`).join('\n')}
${skipped.length ? `\n${skipped.join('\n')}\n` : ''}
${ratios.join('\n\n')}
`;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  try {
    console.log(await affinitySection());
  } finally {
    stopAll();
  }
}
