// Failover policy (issue 12): what a request that needs no retry costs now — status retries armed,
// streams watched and held until their first content, the fleet retry budget counted — against
// the build before it, in the same run. The baseline is built from git (`--baseline <rev>`, by
// default the last commit before issue 12) into a temporary worktree sharing node_modules.
// Standalone: `node bench/failover.js [--quick] [--baseline <rev>]` (starts its own backend).
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cpuAdded, forkReady, here, loadAlternating, round, startGateway, stopAll, quick, ROUNDS, ROUND_S, pct, chatBody, streamBody, endpointLines } from './lib.js';

const BEFORE_ISSUE_12 = 'bbecc2d';
const arg = process.argv.indexOf('--baseline');
const baseline = arg > 0 ? process.argv[arg + 1] : BEFORE_ISSUE_12;
const repo = join(here, '..');

/** A built checkout of `rev` (bin/gw.js runs from it), or null when git cannot provide it. */
function buildBaseline(rev) {
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

function removeBaseline(dir) {
  try {
    execFileSync('git', ['-C', repo, 'worktree', 'remove', '--force', dir], { stdio: 'ignore' });
  } catch {}
}

export async function failoverSection(backendPort) {
  const root = buildBaseline(baseline);
  if (!root) return `## Failover policy\n\nSkipped: the baseline ${baseline} could not be checked out and built (no git history?).\n`;
  try {
    const path = '/gw/pagedengine/v1/chat/completions';
    const config = ['logging: { level: info }', ...endpointLines(backendPort)];
    const before = await startGateway(config, {}, undefined, root);
    const now = await startGateway(config);
    const rows = [];
    for (const [name, body] of [['chat', chatBody], ['stream (10 events)', streamBody]]) {
      const targets = [before, now].map((g) => ({ url: `http://127.0.0.1:${g.port}`, path, body, pid: g.pid }));
      const [a, b] = await loadAlternating(targets, 16, ROUNDS, ROUND_S);
      rows.push({ name, a, b, added: cpuAdded(a, b) });
    }
    const row = (name, x, more) => `| ${name} | ${round(x.rps, 0)} | ${round(x.cpu_us, 1)} | ${more === undefined ? '—' : pct(more)} |`;
    return `## Failover policy (issue 12)

Requests that need no retry, at concurrency 16 (autocannon, ${ROUNDS} alternating rounds of ${ROUND_S} s per gateway), to
two gateways in front of the lean backend with the default configuration: **before** (the build of ${baseline}, the
last commit before issue 12) and **now** (status retries armed, the fleet retry budget counted per request, each
stream watched event by event and held until its first content, its terminator checked at the end). "CPU added" is
the median over the rounds of the extra gateway CPU time per request.

| gateway | c16 req/s | CPU µs/req | CPU added |
|---|---|---|---|
${rows.map((r) => `${row(`${r.name}, before`, r.a)}\n${row(`${r.name}, now`, r.b, r.added)}`).join('\n')}

| target (issue 12) | measured | verdict |
|---|---|---|
| a request that needs no retry costs no more than before (CPU per request, within 2 %) | chat ${pct(rows[0].added)} | ${rows[0].added <= 0.02 ? 'met' : 'NOT met'} |
| the same for a stream, which is now watched event by event (first content, errors, terminator) | ${pct(rows[1].added)}; req/s ${pct(rows[1].b.rps / rows[1].a.rps - 1)} | ${rows[1].added <= 0.02 ? 'met' : 'NOT met: the price of checking every event'} |
`;
  } finally {
    removeBaseline(root);
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  try {
    const { port } = await forkReady('backend.js', ['0']);
    console.log(await failoverSection(port));
  } finally {
    stopAll();
  }
}
