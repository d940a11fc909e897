// Fake cppengine backends for bench/affinity.js, all in this one process: the shipped simulators
// (dist/engine/demo, so `npm run build` first) with a prefill cost per prompt token not in their
// prefix cache. Reports { ports } over IPC; the message "reset" empties their caches and counters
// and is answered { reset: true }.
// Usage: node bench/prefix-backends.js [count=4] [prefillMsPerToken=0.05]
import { FakeBackend } from '../dist/engine/demo/index.js';

const count = Number(process.argv[2] ?? 4);
const prefillMsPerToken = Number(process.argv[3] ?? 0.05);
// About 60 tokens, streamed a word at a time 2 ms apart: decoding is cheap beside an 8k-token prefill.
const REPLY =
  'Here is a considered answer to your question, with a few details worth keeping in mind: first, the context you gave; second, what follows from it; third, what I would check next before deciding anything. Tell me if you want more on any point.';

const fakes = [];
const configure = (f) => Object.assign(f.behaviour, { prefillMsPerToken, chunkDelayMs: 2 });
for (let i = 0; i < count; i++) {
  const fake = await new FakeBackend({ family: 'cppengine', name: `prefix-${i}`, reply: REPLY, slots: 4 }).start();
  configure(fake);
  fakes.push(fake);
}
process.on('message', (m) => {
  if (m !== 'reset') return;
  for (const f of fakes) {
    f.reset();
    configure(f);
  }
  process.send({ reset: true });
});
process.on('disconnect', () => process.exit(0));
process.send({ ports: fakes.map((f) => f.port) });
