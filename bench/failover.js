// What a request that needs no retry costs now against the builds before the failover work, in
// the same run: before issue 12 (status retries armed, streams watched and held until their first
// content, the fleet retry budget counted) and before issue 17 (the route plan made per request,
// the attempt loop walking it, stream shapes handed in by the terminal step) and before issue 18
// (requests sorted into ok, client error or failure; the path kept as sent), before issue 19
// (streams kept for continuation) and before issue 20 (conversation affinity). Each baseline is
// built from git into a temporary worktree sharing node_modules (`--baseline <rev>`: one of your
// own instead). Standalone: `node bench/failover.js [--quick] [--baseline <rev>]` (starts its own backend).
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { hasCallgrind, instructionsPerRequest } from './instructions.js';
import { cpuAdded, here, loadAlternating, round, startGateway, quick, ROUNDS, ROUND_S, pct, chatBody, streamBody, endpointLines, runAlone } from './lib.js';

const BASELINES = [
  {
    rev: 'bbecc2d',
    issue: 12,
    title: 'Failover policy (issue 12)',
    now: 'status retries armed, the fleet retry budget counted per request, each stream watched event by event and held until its first content, its terminator checked at the end',
  },
  {
    rev: 'b108d85',
    issue: 17,
    title: 'Routing and failover as one layer (issue 17)',
    now: 'the route plan made per request by select-endpoint, the attempt loop walking it with its decisions, the stream shape handed in by the terminal step',
    instructions: true,
  },
  {
    rev: '47742a8',
    issue: 18,
    title: "A new user's first hour (issue 18)",
    now: 'each finished request sorted into ok, client error or failure, the path kept as the client sent it, the per-model last resort, the model lists with aliases cached',
    instructions: true,
  },
  {
    rev: '783557b',
    issue: 19,
    title: 'Stream continuation (issue 19)',
    now: 'a watched stream passed on whole events at a time, what it relayed kept so a break can be continued, the continuation API looked up per attempt',
    instructions: true,
    endpoints: 2,
  },
  {
    rev: '3155a1a',
    issue: 20,
    title: 'Conversation affinity and load-aware balancing (issue 20)',
    now: 'each request keyed by its conversation (the body parsed, its system prompt and first user message hashed) and placed by rendezvous hashing with bounded load, the time to first byte averaged per endpoint',
    instructions: true,
    endpoints: 2,
  },
];
const arg = process.argv.indexOf('--baseline');
const baselines = arg > 0 ? [{ ...BASELINES.at(-1), rev: process.argv[arg + 1] }] : BASELINES;
const repo = join(here, '..');

/** A built checkout of `rev` (bin/gw.js runs from it), or null when git cannot provide it. */
export function buildBaseline(rev) {
  const dir = join(mkdtempSync(join(tmpdir(), 'gw-baseline-')), 'tree');
  try {
    execFileSync('git', ['-C', repo, 'worktree', 'add', '--detach', dir, rev], { stdio: 'ignore' });
    symlinkSync(join(repo, 'node_modules'), join(dir, 'node_modules'));
    execFileSync(process.execPath, [join(repo, 'node_modules/typescript/bin/tsc'), '-p', join(dir, 'tsconfig.json')], { stdio: 'inherit' });
    return existsSync(join(dir, 'dist')) ? dir : null;
  } catch {
    return null;
  }
}

/** The same two builds counted by callgrind (bench/instructions.js): the verdict's figure where
 *  valgrind is there, since CPU time on two shared cores moves by several per cent between runs. */
async function instructionTable(backendPort, root, endpoints) {
  if (!hasCallgrind()) return { text: '(Instructions per request not counted: valgrind is not installed.)\n', added: null };
  const kinds = [
    ['chat', chatBody, { warm: quick ? 500 : 10000, count: quick ? 500 : 4000 }],
    ['stream (10 events)', streamBody, { warm: quick ? 100 : 2000, count: quick ? 100 : 800 }],
  ];
  const rows = [];
  const added = [];
  for (const [name, body, n] of kinds) {
    const before = await instructionsPerRequest(root, backendPort, body, n, endpoints);
    const now = await instructionsPerRequest(repo, backendPort, body, n, endpoints);
    added.push(now.withoutCompiler / before.withoutCompiler - 1);
    rows.push(
      `| ${name} | ${Math.round(before.total)} | ${Math.round(now.total)} | ${pct(now.total / before.total - 1)} | ${Math.round(before.withoutCompiler)} | ${Math.round(now.withoutCompiler)} | ${pct(added.at(-1))} |`,
    );
  }
  const text = `Instructions per request, counted by callgrind over ${kinds[0][2].count} sequential chat requests and ${kinds[1][2].count} streams after a
warm-up of ${kinds[0][2].warm} and ${kinds[1][2].warm} (bench/instructions.js): a count the machine's other load does not move
(but one build counted again moves by up to about 2 %, with what the JIT optimises and when: a verdict near
its target wants the median of several pairs, bench/instructions-repeat.js). "Steady" leaves out the JIT compiler's own instructions (it may
still be optimising functions after the warm-up): the cost of the request path itself, which the verdict uses.

| request | before, all | now, all | added | before, steady | now, steady | added |
|---|---|---|---|---|---|---|
${rows.join('\n')}
`;
  return { text, added };
}

export function removeBaseline(dir) {
  try {
    execFileSync('git', ['-C', repo, 'worktree', 'remove', '--force', dir], { stdio: 'ignore' });
  } catch {}
}

export async function failoverSection(backendPort) {
  const sections = [];
  for (const b of baselines) sections.push(await comparison(backendPort, b));
  return sections.join('\n');
}

async function comparison(backendPort, { rev: baseline, issue, title, now: what, instructions, endpoints = 1 }) {
  const root = buildBaseline(baseline);
  if (!root) return `## ${title}\n\nSkipped: the baseline ${baseline} could not be checked out and built (no git history?).\n`;
  try {
    const path = '/gw/pagedengine/v1/chat/completions';
    // Two endpoints (of the one backend): each can continue the other's streams, so they keep them.
    const lines = endpointLines(backendPort);
    if (endpoints === 2) lines.push(lines.at(-1).replace('name: bench,', 'name: bench-2,'));
    const config = ['logging: { level: info }', ...lines];
    const before = await startGateway(config, {}, undefined, root);
    const now = await startGateway(config);
    const rows = [];
    for (const [name, body] of [
      ['chat', chatBody],
      ['stream (10 events)', streamBody],
    ]) {
      const targets = [before, now].map((g) => ({ url: `http://127.0.0.1:${g.port}`, path, body, pid: g.pid }));
      const [a, b] = await loadAlternating(targets, 16, ROUNDS, ROUND_S);
      rows.push({ name, a, b, added: cpuAdded(a, b) });
    }
    const row = (name, x, more) => `| ${name} | ${round(x.rps, 0)} | ${round(x.cpu_us, 1)} | ${more === undefined ? '—' : pct(more)} |`;
    const counted = instructions ? await instructionTable(backendPort, root, endpoints) : null;
    const verdict = (cpu, ir) => ((ir !== undefined ? ir <= 0.02 : cpu <= 0.02) ? 'met' : 'NOT met');
    return `## ${title}

Requests that need no retry, at concurrency 16 (autocannon, ${ROUNDS} alternating rounds of ${ROUND_S} s per gateway), to
two gateways in front of the lean backend${endpoints === 2 ? ' registered as two endpoints' : ''} with the default configuration: **before** (the build of ${baseline}, the
last commit before issue ${issue}) and **now** (${what}). "CPU added" is
the median over the rounds of the extra gateway CPU time per request.

| gateway | c16 req/s | CPU µs/req | CPU added |
|---|---|---|---|
${rows.map((r) => `${row(`${r.name}, before`, r.a)}\n${row(`${r.name}, now`, r.b, r.added)}`).join('\n')}

${counted?.text ?? ''}
| target (issue ${issue}) | measured | verdict |
|---|---|---|
| a request that needs no retry costs no more than before (CPU per request, within 2 %) | chat: CPU ${pct(rows[0].added)}${counted?.added ? `; instructions ${pct(counted.added[0])}` : ''} | ${verdict(rows[0].added, counted?.added?.[0])} |
| the same for a watched stream (first content, errors, terminator) | CPU ${pct(rows[1].added)}; req/s ${pct(rows[1].b.rps / rows[1].a.rps - 1)}${counted?.added ? `; instructions ${pct(counted.added[1])}` : ''} | ${verdict(rows[1].added, counted?.added?.[1])} |
`;
  } finally {
    removeBaseline(root);
  }
}

await runAlone(import.meta.url, failoverSection);
