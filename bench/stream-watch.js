// Micro-benchmark of StreamWatch, the per-chunk watcher every streamed reply goes through:
// CPU µs per event for a typical chat chunk, per 10-event stream, and JSON.parse alone on the
// same data for comparison. Not part of `npm test` or `npm run bench`.
//   npx tsc -p tsconfig.json && node bench/stream-watch.js
import { StreamWatch } from '../dist/engine/routing/stream-watch.js';

const chunk = (delta, finish = null) =>
  `data: ${JSON.stringify({ id: 'chatcmpl-42', object: 'chat.completion.chunk', created: 1732000000, model: 'llama3', choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;

const typical = chunk({ content: ' world' });
const words = [' The', ' quick', ' brown', ' fox', ' jumps', ' over', ' the', ' dog'];
const stream = [chunk({ role: 'assistant', content: '' }), ...words.map((w) => chunk({ content: w })), chunk({}, 'stop'), 'data: [DONE]\n\n'];
const events = stream.length; // 11 events: 10 JSON chunks and [DONE]

const typicalBuf = Buffer.from(typical);
const streamBufs = stream.map((s) => Buffer.from(s));
const streamWhole = Buffer.from(stream.join(''));
// Every event cut in two (the unfinished-line path).
const streamHalves = stream.flatMap((s) => {
  const b = Buffer.from(s);
  const h = b.length >> 1;
  return [b.subarray(0, h), b.subarray(h)];
});
const typicalData = typical.slice(6, -2);
const streamData = stream.map((s) => s.slice(6, -2)).filter((d) => d !== '[DONE]');

/** Median CPU µs per unit over 7 rounds of `n` calls of fn (after a warm-up). */
function measure(n, units, fn) {
  for (let i = 0; i < n; i++) fn();
  const rounds = [];
  for (let r = 0; r < 7; r++) {
    const start = process.cpuUsage();
    for (let i = 0; i < n; i++) fn();
    const used = process.cpuUsage(start);
    rounds.push((used.user + used.system) / (n * units));
  }
  return rounds.sort((a, b) => a - b)[3];
}

let sink = 0;
const rows = [
  [
    `typical chat chunk (${typicalBuf.length} B), one event per feed`,
    'µs/event',
    measure(
      200_000,
      1,
      (() => {
        const w = new StreamWatch('sse');
        return () => {
          sink += w.feed(typicalBuf).length;
        };
      })(),
    ),
  ],
  [
    '  JSON.parse alone of its data',
    'µs/event',
    measure(200_000, 1, () => {
      sink += JSON.parse(typicalData).created;
    }),
  ],
  [
    '  Buffer.toString + JSON.parse of its data',
    'µs/event',
    measure(200_000, 1, () => {
      sink += JSON.parse(typicalBuf.toString('utf8', 6, typicalBuf.length - 2)).created;
    }),
  ],
  [
    `${events}-event stream, one event per feed (new watcher each)`,
    'µs/stream',
    measure(20_000, 1, () => {
      const w = new StreamWatch('sse');
      for (const b of streamBufs) w.feed(b);
      sink += w.complete ? 1 : 0;
    }),
  ],
  [
    `${events}-event stream, one feed for the whole stream`,
    'µs/stream',
    measure(20_000, 1, () => {
      const w = new StreamWatch('sse');
      w.feed(streamWhole);
      sink += w.complete ? 1 : 0;
    }),
  ],
  [
    `${events}-event stream, every event cut in two`,
    'µs/stream',
    measure(20_000, 1, () => {
      const w = new StreamWatch('sse');
      for (const b of streamHalves) w.feed(b);
      sink += w.complete ? 1 : 0;
    }),
  ],
  [
    `  JSON.parse alone of the stream's data`,
    'µs/stream',
    measure(20_000, 1, () => {
      for (const d of streamData) sink += JSON.parse(d).created;
    }),
  ],
];

console.log(`node ${process.version}, ${typicalBuf.length}-byte chunk; CPU time (user+system), median of 7 rounds`);
for (const [what, unit, v] of rows) console.log(`${what.padEnd(62)} ${v.toFixed(3).padStart(8)} ${unit}`);
if (sink === 42) console.log('');
