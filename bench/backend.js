// A lean fake backend for benchmarks (the test fakes record every request; this one does not):
// a chat-completions reply, and an SSE stream of 10 events 2 ms apart (the last with its finish_reason;
// "bench_events" in the body sets another count).
import { createServer } from 'node:http';

const port = Number(process.argv[2] ?? 0);
const reply = JSON.stringify({
  id: 'chatcmpl-bench',
  object: 'chat.completion',
  created: 1732000000,
  model: 'bench-model',
  choices: [{ index: 0, message: { role: 'assistant', content: 'Hello from the benchmark backend.' }, logprobs: null, finish_reason: 'stop' }],
  usage: { prompt_tokens: 12, completion_tokens: 8, total_tokens: 20 },
});
const models = JSON.stringify({ object: 'list', data: [{ id: 'bench-model', object: 'model', created: 1732000000, owned_by: 'bench', max_model_len: 32768 }] });
// The last event says why the answer ended (finish_reason), as the engines' streams do.
const event = (i, last) =>
  `data: ${JSON.stringify({ id: 'chatcmpl-bench', object: 'chat.completion.chunk', created: 1732000000, model: 'bench-model', choices: [{ index: 0, delta: { content: ` w${i}` }, logprobs: null, finish_reason: i === last ? 'stop' : null }] })}\n\n`;

const USAGE_EVENT = `data: ${JSON.stringify({ id: 'chatcmpl-bench', object: 'chat.completion.chunk', created: 1732000000, model: 'bench-model', choices: [], usage: { prompt_tokens: 12, completion_tokens: 10, total_tokens: 22 } })}\n\n`;

const server = createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    if (req.url === '/health') return res.end('{"status":"ok"}');
    if (req.url === '/v1/models') return res.end(models);
    const stream = chunks.length && Buffer.concat(chunks).includes('"stream":true');
    if (!stream) {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(reply) });
      return res.end(reply);
    }
    // Slow streams for the memory and tail benchmarks (bench/streams.js): "bench_gap_ms" in the
    // body (every proxy passes the body on; the bare one drops headers) sets the gap between events.
    // Asked for its usage (a gateway counting tokens asks): one more event with it, as vLLM sends.
    const usageAsked = Buffer.concat(chunks).includes('"include_usage":true');
    const text = Buffer.concat(chunks).toString();
    const gap = Number(/"bench_gap_ms":(\d+)/.exec(text)?.[1]) || 2;
    const events = Number(/"bench_events":(\d+)/.exec(text)?.[1]) || 10;
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    res.flushHeaders();
    let i = 0;
    const tick = () => {
      if (i < events) {
        res.write(event(i++, events - 1));
        setTimeout(tick, gap);
      } else res.end(`${usageAsked ? USAGE_EVENT : ''}data: [DONE]\n\n`);
    };
    tick();
  });
});
server.listen(port, '127.0.0.1', () => process.send?.({ port: server.address().port }));
