// Where a request's instructions go, per function: the gateway under callgrind (bench/
// instructions.js) with its compiled JavaScript named from its perf map (node --perf-basic-prof),
// so that the JIT's code reads as the functions it came from rather than bare addresses.
// `node bench/profile.js [chat|stream] [TOP] [floor]`: the TOP functions (default 40) by their own
// instructions per request, the JIT compiler's included (its lines start `v8::internal::compiler`);
// the stream is bench/floor.js's (20 events); with `floor`, the floor proxy's profile instead.
import { readFileSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { CHECKS, ENDPOINTS, floorInstructions, KINDS } from './floor.js';
import { hasCallgrind, instructionsPerRequest } from './instructions.js';
import { forkReady, stopAll } from './lib.js';

if (!hasCallgrind()) {
  console.log('valgrind (callgrind) is not installed: nothing counted');
  process.exit(0);
}
const kind = process.argv[2] === 'stream' ? 'stream' : 'chat';
const top = Number(process.argv[3] ?? 40);
const { body, counts } = KINDS[kind === 'chat' ? 0 : 1];
const ofFloor = process.argv[4] === 'floor';

/** The perf map's entries (start, size, name), sorted by start; a later entry wins an overlap. */
function perfMap(pid) {
  const entries = [];
  readFileSync(`/tmp/perf-${pid}.map`, 'utf8')
    .split('\n')
    .forEach((line, order) => {
      const [start, size, ...name] = line.split(' ');
      if (name.length > 0)
        entries.push({ start: Number.parseInt(start, 16), end: Number.parseInt(start, 16) + Number.parseInt(size, 16), name: name.join(' '), order });
    });
  return entries.sort((a, b) => a.start - b.start);
}

/** The name of the code holding `address` (the latest of those that held it), if the map has it. */
function nameAt(entries, address) {
  let lo = 0;
  let hi = entries.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if (entries[mid].start <= address) lo = mid + 1;
    else hi = mid - 1;
  }
  let best = null;
  for (let i = hi; i >= 0 && i > hi - 50; i--)
    if (entries[i].start <= address && address < entries[i].end && (!best || entries[i].order > best.order)) best = entries[i];
  return best?.name;
}

process.env.GW_PERF_MAP = '1';
const { port } = await forkReady('backend.js', ['0']);
try {
  const root = new URL('..', import.meta.url).pathname;
  const r = ofFloor ? await floorInstructions(port, body, counts) : await instructionsPerRequest(root, port, body, counts, ENDPOINTS, CHECKS);
  const entries = perfMap(r.pid);
  const text = spawnSync('callgrind_annotate', ['--threshold=100', r.out], { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 }).stdout;
  const self = new Map();
  for (const line of text.split('\n')) {
    const m = /^\s*([\d,]+) \(\s*[\d.]+%\)\s+(.*)$/.exec(line);
    if (!m || m[2].includes('PROGRAM TOTALS')) continue;
    const address = /^\?\?\?:0x([0-9a-f]+) /.exec(m[2]);
    const name = address ? `JS ${nameAt(entries, Number.parseInt(address[1], 16)) ?? 'unnamed JIT code'}` : m[2];
    self.set(name, (self.get(name) ?? 0) + Number(m[1].replaceAll(',', '')));
  }
  console.log(`${kind}: ${Math.round(r.total)} instructions per request (${Math.round(r.withoutCompiler)} without the JIT compiler's)`);
  for (const [name, n] of [...self].sort((a, b) => b[1] - a[1]).slice(0, top))
    console.log(`${String(Math.round(n / counts.count)).padStart(8)}  ${name.slice(0, 150)}`);
} finally {
  stopAll();
}
