// Instructions per request, counted again and again: `node bench/instructions-repeat.js REV
// [PAIRS] [stream|chat]` builds REV and counts it against the working tree, PAIRS times in turn
// (default 3), in front of the lean backend registered as two endpoints, and prints each pair and
// the median difference; a streamed request (10 events) by default, or a chat request. One pair
// moves by a percent or two from run to run (what the JIT optimises and when): a verdict near its
// target wants the median of several.
import { buildBaseline, removeBaseline } from './failover.js';
import { instructionsPerRequest } from './instructions.js';
import { chatBody, forkReady, stopAll, streamBody } from './lib.js';

const [rev, pairs = '3', kind = 'stream'] = process.argv.slice(2);
const KINDS = { stream: [streamBody, { warm: 2000, count: 800 }], chat: [chatBody, { warm: 10000, count: 4000 }] };
if (!KINDS[kind]) throw new Error(`the third argument is stream or chat, not ${kind}`);
const [body, counts] = KINDS[kind];
const root = buildBaseline(rev);
if (!root) throw new Error(`cannot check out and build ${rev}`);
const { port } = await forkReady('backend.js', ['0']);
try {
  const added = [];
  console.log(`| pair | ${rev} | working tree | added |  (${kind}, steady instructions per request)`);
  for (let i = 0; i < Number(pairs); i++) {
    const before = await instructionsPerRequest(root, port, body, counts, 2);
    const now = await instructionsPerRequest(new URL('..', import.meta.url).pathname, port, body, counts, 2);
    added.push(now.withoutCompiler / before.withoutCompiler - 1);
    console.log(`| ${i + 1} | ${Math.round(before.withoutCompiler)} | ${Math.round(now.withoutCompiler)} | ${(added.at(-1) * 100).toFixed(1)}% |`);
  }
  const sorted = [...added].sort((a, b) => a - b);
  console.log(`median: ${(sorted[Math.floor(sorted.length / 2)] * 100).toFixed(1)}%`);
} finally {
  stopAll();
  removeBaseline(root);
}
