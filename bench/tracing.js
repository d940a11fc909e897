// Bench section: what tracing costs per request, in instructions (callgrind: steady on two busy
// cores, where CPU time is not). The same working tree in front of the lean backend, tracing off
// (the default) and on, its spans exported over OTLP/HTTP in batches to a sink started here (a
// loopback server answering 200, as a collector does), every trace recorded (sample_ratio 1) and
// one in ten (0.1): a chat request and a 10-event stream.
// Standalone: node bench/tracing.js [PAIRS] (needs `npm run build` and valgrind).
import { once } from 'node:events';
import { createServer } from 'node:http';
import { hasCallgrind, instructionsPerRequest } from './instructions.js';
import { chatBody, forkReady, here, stopAll, streamBody } from './lib.js';
import { join } from 'node:path';

const KINDS = { chat: [chatBody, { warm: 10000, count: 4000 }], stream: [streamBody, { warm: 2000, count: 800 }] };

if (!hasCallgrind()) {
  console.log('tracing bench skipped: valgrind (callgrind) is not installed');
  process.exit(0);
}
const pairs = Number(process.argv[2] ?? 1);
let spans = 0;
const sink = createServer((req, res) => {
  req.on('data', () => {});
  req.on('end', () => {
    spans++;
    res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
  });
}).listen(0, '127.0.0.1');
await once(sink, 'listening');
const tracingAt = (ratio) => [`tracing: { enabled: true, sample_ratio: ${ratio}, endpoint: "http://127.0.0.1:${sink.address().port}/v1/traces" }`];
const root = join(here, '..');
const { port } = await forkReady('backend.js', ['0']);
try {
  console.log('| request | tracing off | on, every trace | added | on, one in ten | added |  (steady instructions per request)');
  for (const [kind, [body, counts]] of Object.entries(KINDS)) {
    for (let i = 0; i < pairs; i++) {
      const off = await instructionsPerRequest(root, port, body, counts, 2);
      const all = await instructionsPerRequest(root, port, body, counts, 2, '', tracingAt(1));
      const tenth = await instructionsPerRequest(root, port, body, counts, 2, '', tracingAt(0.1));
      const added = (x) => `${((x.withoutCompiler / off.withoutCompiler - 1) * 100).toFixed(1)}%`;
      const n = (x) => Math.round(x.withoutCompiler);
      console.log(`| ${kind} | ${n(off)} | ${n(all)} | ${added(all)} | ${n(tenth)} | ${added(tenth)} |`);
    }
  }
  console.log(`(the sink received ${spans} exports)`);
} finally {
  stopAll();
  sink.close();
}
