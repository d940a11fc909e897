// Bench section: the gateway against the floor for Node (bench/floor-proxy.js, a bare undici
// pass-through), in instructions per request under callgrind — the one measure two busy shared cores
// do not move. Both in front of the lean backend, after a warm-up, the JIT compiler's own work left
// out; the gateway with its shipped defaults (affinity, continuation keeping, stream watching,
// metrics, the access log; rate limits off, as the load comes from one address): a chat request and
// a 20-event stream. Standalone: `node bench/floor.js [RUNS]` (needs `npm run build` and valgrind);
// with RUNS > 1 the median ratio of the runs.
import { join } from 'node:path';
import { hasCallgrind, instructionsOf, instructionsPerRequest } from './instructions.js';
import { chatBody, freePort, here, quick, round, runAlone, streamBody } from './lib.js';

const STREAM_EVENTS = 20;
export const KINDS = [
  { kind: 'chat completion', body: chatBody, counts: { warm: 20000, count: 4000 }, target: 1.1 },
  {
    kind: `${STREAM_EVENTS}-event stream`,
    body: streamBody.replace('"stream":true', `"stream":true,"bench_events":${STREAM_EVENTS}`),
    counts: { warm: 8000, count: 800 },
    target: 1.15,
  },
];
/** The backend registered twice: with another candidate, a stream's answer is kept for continuation. */
export const ENDPOINTS = 2;
/** Health checks (and the engine reports read after them) cost per endpoint per interval, not per
 *  request: under callgrind's slowed clock the 5 s default put about 55 k instructions of them on
 *  each counted stream (1.305 M against 1.248 M, one build). Checked every 10 minutes here, so
 *  that what is counted is the request path; the floor checks nothing. */
export const CHECKS = ', check_interval: 10m';
const ROUTE = { type: 'pagedengine', path: '/gw/pagedengine/v1/chat/completions' };

export async function floorInstructions(backendPort, body, counts) {
  const port = await freePort();
  // The floor has no health route of its own: the backend's, through it, says it is up.
  const ready = async () => (await fetch(`http://127.0.0.1:${port}/gw/x/health`)).ok;
  return instructionsOf([join(here, 'floor-proxy.js'), `http://127.0.0.1:${backendPort}`, String(port)], { port, ready }, ROUTE, body, counts);
}

const median = (v) => [...v].sort((a, b) => a - b)[v.length >> 1];

/** The table for RESULTS.md; `runs` pairs per request kind, the median ratio judged. */
export async function floorSection(backendPort, runs = quick ? 1 : 3) {
  if (!hasCallgrind()) return '## Against the floor, in instructions\n\n(Not counted: valgrind is not installed.)\n';
  const root = join(here, '..');
  const rows = [];
  const verdicts = [];
  for (const { kind, body, counts, target } of KINDS) {
    const ratios = [];
    for (let i = 0; i < runs; i++) {
      const floor = await floorInstructions(backendPort, body, counts);
      const gateway = await instructionsPerRequest(root, backendPort, body, counts, ENDPOINTS, CHECKS, [], ROUTE);
      ratios.push(gateway.withoutCompiler / floor.withoutCompiler);
      rows.push(
        `| ${kind} | ${Math.round(floor.withoutCompiler)} | ${Math.round(gateway.withoutCompiler)} | ${round(ratios.at(-1), 3)} | ${Math.round(floor.total)} | ${Math.round(gateway.total)} |`,
      );
    }
    const m = median(ratios);
    verdicts.push(`| ${kind}: gateway ÷ floor ≤ ${target} | ${round(m, 3)}${runs > 1 ? ` (median of ${runs})` : ''} | ${m <= target ? 'met' : 'NOT met'} |`);
  }
  return `## Against the floor, in instructions

Instructions per request under callgrind (bench/floor.js): the floor (bench/floor-proxy.js, a bare undici pass-through)
and the gateway with its shipped defaults (affinity, continuation keeping, stream watching, metrics, the access log at
info; the backend registered twice, so that a stream's answer is kept for continuation; health checks every 10 minutes,
as they cost per interval, not per request), each in front of the lean backend, ${KINDS[0].counts.warm} chat requests or ${KINDS[1].counts.warm} streams of warm-up, then ${KINDS[0].counts.count} or ${KINDS[1].counts.count} counted
one after another. "Steady" leaves out the JIT compiler's own instructions.

| request | floor, steady | gateway, steady | gateway ÷ floor | floor, all | gateway, all |
|---|---|---|---|---|---|
${rows.join('\n')}

| target | measured | verdict |
|---|---|---|
${verdicts.join('\n')}
`;
}

await runAlone(import.meta.url, (port) => floorSection(port, Number(process.argv[2] ?? 1)));
