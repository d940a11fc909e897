// The relay (engine/routing/relay.ts) driven by the attempt loop over a fake exchange: what
// reaches the client of a backend's reply, byte for byte. Exact replies come from scripted
// node:http backends; a healthy next candidate is a FakeBackend. No Gateway, no pipeline.
import { describe, expect, it } from 'vitest';
import type { Endpoint } from '../../../engine/backends/endpoints.js';
import { planOf } from '../../../engine/routing/plan.js';
import type { StreamShape } from '../../../engine/routing/stream-watch.js';
import { INFERENCE_API } from '../../../plugins/apis/inference-api.js';
import { policy, routingHarness, type Policy } from '../../helpers/exchange.js';

const HELD_LIMIT = 64 * 1024; // relay.ts
const h = routingHarness();
const { endpoints, scripted, jobs } = h;
const healthy = (name: string) => h.fake(name);
/** One request (streamed unless `stream` is false) to the endpoints in this order. */
const start = (p: Policy, eps: Endpoint[], stream = true) => h.start(p, planOf(eps, null), stream);
const send = (p: Policy, eps: Endpoint[], stream = true) => h.send(p, planOf(eps, null), stream);

const SSE = { 'content-type': 'text/event-stream' };
const chunk = (delta: object, finish: string | null = null) =>
  `data: ${JSON.stringify({ id: 'x', object: 'chat.completion.chunk', choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
const ROLE = chunk({ role: 'assistant', content: '' });
const WORD = chunk({ content: 'Hi' });
const DONE = `${chunk({}, 'stop')}data: [DONE]\n\n`;

/** A promise and the function that settles it: a signal between a backend and the test. */
function signal(): { wait: Promise<void>; fire: () => void } {
  let fire!: () => void;
  const wait = new Promise<void>((r) => (fire = r));
  return { wait, fire };
}

describe('Relay', () => {
  it('pipes a non-streamed 200 as it is: status, headers, body', async () => {
    const bytes = Buffer.from('{ "exact" :  "bytes", "ü": [1,2] }\n');
    const url = await scripted((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': bytes.length, 'x-backend-note': 'kept' });
      res.end(bytes);
    });
    const r = await send(policy(), endpoints(url), false);
    expect([r.status, r.headers['content-type'], r.headers['content-length'], r.headers['x-backend-note']]).toEqual([
      200,
      'application/json',
      String(bytes.length),
      'kept',
    ]);
    expect(r.body.equals(bytes)).toBe(true);
    expect(r.rec.streamed).toBe(false);
  });

  it('holds an SSE stream (head and all) until its first content, then events flow as they come', async () => {
    const [content, end] = [signal(), signal()];
    const url = await scripted(async (_req, res) => {
      res.writeHead(200, SSE);
      res.write(ROLE);
      await content.wait;
      res.write(WORD);
      await end.wait;
      res.end(DONE);
    });
    // The shape tells the test when the relay has read the role event (it classifies it then).
    const roleRead = signal();
    const streams: StreamShape = {
      ...INFERENCE_API.streams,
      classify: (v, name) => {
        if ((v as any)?.choices?.[0]?.delta?.role) roleRead.fire();
        return INFERENCE_API.streams.classify(v, name);
      },
    };
    const sent = start(policy({ api: { ...INFERENCE_API, streams } }), endpoints(url));
    await roleRead.wait;
    const job = [...jobs.values()].at(-1)!;
    expect(job.ex!.res.headersSent).toBe(false);
    content.fire();
    const { res } = await sent;
    expect([res.statusCode, res.headers['content-type']]).toEqual([200, 'text/event-stream']);
    let text = '';
    for await (const c of res.body) {
      text += c;
      // The content reached the client while the backend still waits to end its stream.
      if (text === ROLE + WORD) end.fire();
    }
    expect(text).toBe(ROLE + WORD + DONE);
    expect(job.ex!.rec!.streamed).toBe(true);
  });

  it('an error event before content: the next candidate gets the request, the client sees none of it', async () => {
    const url = await scripted((_req, res) => {
      res.writeHead(200, SSE);
      res.end(`${ROLE}data: {"error":{"message":"out of memory"}}\n\n`);
    });
    const fb = await healthy('b');
    const r = await send(policy(), endpoints(url, fb.url));
    expect(r.status).toBe(200);
    expect(r.text).toContain('"content":"Hello"');
    expect(r.text).not.toContain('out of memory');
    expect(r.text.endsWith('data: [DONE]\n\n')).toBe(true);
    expect(r.rec.tried).toEqual([expect.objectContaining({ endpoint: 'a', outcome: 'stream_error (backend error: out of memory)' })]);
  });

  it('a stream that ends without its terminator after content ends with an in-stream error, never a truncated success', async () => {
    const url = await scripted((_req, res) => {
      res.writeHead(200, SSE);
      res.end(ROLE + WORD);
    });
    const fb = await healthy('b');
    const r = await send(policy(), endpoints(url, fb.url));
    expect(r.status).toBe(200);
    expect(r.text.startsWith(ROLE + WORD)).toBe(true);
    const last = JSON.parse(r.text.slice((ROLE + WORD).length).replace(/^data: /, ''));
    expect(last.error).toMatchObject({ type: expect.any(String), message: expect.stringContaining('endpoint a ended the stream without its terminator') });
    expect(r.ex.error).toMatchObject({ key: 'UPSTREAM_STREAM_BROKEN' });
    // Its content reached the client: not sent again elsewhere (no continuation in this policy).
    expect(fb.received).toHaveLength(0);
  });

  it('a stream reset mid-way after content ends with an in-stream error too', async () => {
    const fa = await healthy('a');
    fa.behaviour.resetAfterChunks = 2;
    const r = await send(policy(), endpoints(fa.url));
    expect(r.text).toContain('"content":"Hello"');
    expect(r.text).toMatch(/data: \{"error":\{"message":"[^"]*endpoint a broke off the reply[^\n]*\n\n$/);
    expect(r.ex.error).toBeTruthy();
  });

  it(`holds a 5xx back up to ${HELD_LIMIT} bytes; a larger one is relayed as it is`, async () => {
    let size = 0;
    const url = await scripted((_req, res) => {
      res.writeHead(503, { 'content-type': 'text/plain', 'content-length': size });
      res.end('x'.repeat(size));
    });
    const fb = await healthy('b');
    const [a, b] = endpoints(url, fb.url);
    size = HELD_LIMIT;
    const held = await send(policy(), [a, b], false);
    expect([held.status, held.rec.endpoint]).toEqual([200, b]);

    size = HELD_LIMIT + 1;
    fb.reset();
    const big = await send(policy(), [a, b], false);
    expect([big.status, big.body.length, big.rec.count]).toEqual([503, HELD_LIMIT + 1, 1]);
    expect(big.text).toBe('x'.repeat(HELD_LIMIT + 1));
    expect(fb.received).toHaveLength(0);
  });

  it('a reply plan transforms a whole body; past its limit the reply fails, or with an overflow plan is piped after all', async () => {
    const url = await scripted(async (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.write('hello ');
      res.end('world');
    });
    const [a] = endpoints(url);
    const upper =
      (limit: number, overflow?: { kind: 'pipe' }): Policy['reply'] =>
      () => ({
        kind: 'buffer',
        limit,
        overflow,
        finish: (s, body) => ({ status: 201, headers: ['content-type', 'text/x-shaped'], body: `${s}:${body.toString().toUpperCase()}` }),
      });

    const shaped = await send(policy({ reply: upper(1024) }), [a], false);
    expect([shaped.status, shaped.headers['content-type'], shaped.headers['content-length'], shaped.text]).toEqual([
      201,
      'text/x-shaped',
      '15',
      '200:HELLO WORLD',
    ]);

    const over = await send(policy({ reply: upper(4) }), [a], false);
    expect(over.error).toMatchObject({ key: 'UPSTREAM_ERROR', status: 502 });

    const piped = await send(policy({ reply: upper(4, { kind: 'pipe' }) }), [a], false);
    expect([piped.status, piped.text]).toEqual([200, 'hello world']);
  });
});

describe('Relay: counting and filtering', () => {
  const USAGE = `data: ${JSON.stringify({ id: 'x', object: 'chat.completion.chunk', choices: [], usage: { prompt_tokens: 7, completion_tokens: 2 } })}\n\n`;

  it("a piped plan's filter decides what of each chunk goes out, events sharing a chunk included", async () => {
    const url = await scripted((_req, res) => {
      res.writeHead(200, SSE);
      res.write(ROLE + WORD);
      res.end(`${chunk({}, 'stop')}${USAGE}data: [DONE]\n\n`); // one chunk: the usage event among others
    });
    const dropUsage = (b: Buffer) => Buffer.from(b.toString().replace(USAGE, ''));
    const r = await send(policy({ reply: () => ({ kind: 'pipe', filter: dropUsage }) }), endpoints(url));
    expect(r.text).toBe(ROLE + WORD + DONE);
  });

  it('while usage is counted: what the stream reported, or an estimate said to be one', async () => {
    const url = await scripted((_req, res) => {
      res.writeHead(200, SSE);
      res.end(`${ROLE}${WORD}${WORD}${chunk({}, 'stop')}${USAGE}data: [DONE]\n\n`);
    });
    const counted = await h.send(policy(), planOf(endpoints(url), null), true, true);
    expect(counted.rec.usage).toEqual({ input: 7, cachedInput: 0, output: 2, reasoning: 0, estimated: 0 });
    const silent = await scripted((_req, res) => {
      res.writeHead(200, SSE);
      res.end(ROLE + WORD + WORD + WORD + DONE);
    });
    const estimated = await h.send(policy(), planOf(endpoints(silent), null), true, true);
    const usage = estimated.rec.usage!;
    expect(usage.output).toBe(3);
    expect(usage.input).toBe(Math.ceil(estimated.ex.body.length / 4));
    expect(usage.estimated).toBe(usage.input + usage.output);
    // Not counted: nothing read.
    expect((await h.send(policy(), planOf(endpoints(silent), null), true)).rec.usage).toBeNull();
  });
});
