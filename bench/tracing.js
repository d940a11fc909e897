// Bench section: what tracing costs per request, in instructions (callgrind: steady on two busy
// cores, where CPU time is not). The same working tree in front of the lean backend, tracing off
// (the default) and on, its spans exported over OTLP/HTTP in batches to a sink started here (a
// loopback server answering 200, as a collector does): a chat request and a 10-event stream.
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
const tracingOn = [`tracing: { enabled: true, endpoint: "http://127.0.0.1:${sink.address().port}/v1/traces" }`];
const root = join(here, '..');
const { port } = await forkReady('backend.js', ['0']);
try {
  console.log('| request | tracing off | tracing on | added |  (steady instructions per request)');
  for (const [kind, [body, counts]] of Object.entries(KINDS)) {
    for (let i = 0; i < pairs; i++) {
      const off = await instructionsPerRequest(root, port, body, counts, 2);
      const on = await instructionsPerRequest(root, port, body, counts, 2, '', tracingOn);
      const added = on.withoutCompiler / off.withoutCompiler - 1;
      console.log(`| ${kind} | ${Math.round(off.withoutCompiler)} | ${Math.round(on.withoutCompiler)} | ${(added * 100).toFixed(1)}% |`);
    }
  }
  console.log(`(the sink received ${spans} exports)`);
} finally {
  stopAll();
  sink.close();
}
