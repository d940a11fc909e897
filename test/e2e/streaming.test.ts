// Streams are relayed event by event as the backend sends them, and a client that leaves
// cancels the upstream request.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { request as httpRequest } from 'node:http';
import { FakeBackend } from '../fakes/index.js';
import { endpoint, startGateway, type Started } from '../helpers/gateway.js';
import { timedChunks } from '../helpers/http.js';

let local: FakeBackend, cpp: FakeBackend, gw: Started;
beforeAll(async () => {
  local = await new FakeBackend({ family: 'localrunner', reply: 'alpha beta gamma delta epsilon' }).start();
  cpp = await new FakeBackend({ family: 'cppengine', reply: 'alpha beta gamma delta epsilon' }).start();
  gw = await startGateway({ discovery: { static: { endpoints: [endpoint('local', 'localrunner', local.url), endpoint('cpp', 'cppengine', cpp.url)] } } });
});
afterAll(async () => {
  await gw.close();
  await local.stop();
  await cpp.stop();
});
beforeEach(() => {
  local.reset();
  cpp.reset();
});

const GAP = 80;

function expectSpread(chunks: { at: number; text: string }[], minEvents: number) {
  expect(chunks.length).toBeGreaterThanOrEqual(minEvents);
  // Each event arrived on its own, about one gap after the previous: no batching on the way.
  for (let i = 1; i < minEvents; i++) expect(chunks[i].at - chunks[i - 1].at).toBeGreaterThan(GAP * 0.5);
}

describe('streaming relay', () => {
  it('relays chat-completions SSE events one by one', async () => {
    local.behaviour.chunkDelayMs = GAP;
    const r = await timedChunks(`${gw.url}/gw/localrunner/v1/chat/completions`, { body: JSON.stringify({ model: 'test-model', messages: [], stream: true }) });
    expect(r.status).toBe(200);
    expect(r.headers['content-type']).toBe('text/event-stream');
    expectSpread(r.chunks, 7);
    const events = r.chunks.map((c) => c.text);
    expect(events[0]).toMatch(/^data: \{.*"role":"assistant"/);
    expect(events.at(-1)).toBe('data: [DONE]\n\n');
    expect(r.chunks[0].at - r.headersAt).toBeLessThan(GAP);
  });

  it('relays native NDJSON lines one by one', async () => {
    local.behaviour.chunkDelayMs = GAP;
    const r = await timedChunks(`${gw.url}/gw/localrunner/api/generate`, { body: JSON.stringify({ model: 'test-model', prompt: 'p' }) });
    expect(r.headers['content-type']).toBe('application/x-ndjson');
    expectSpread(r.chunks, 6);
    const lines = r.chunks.map((c) => JSON.parse(c.text));
    expect(lines.map((l) => l.response).join('')).toBe('alpha beta gamma delta epsilon');
    expect(lines.at(-1).done).toBe(true);
  });

  it('relays native SSE of the C++ engine', async () => {
    cpp.behaviour.chunkDelayMs = GAP;
    const r = await timedChunks(`${gw.url}/gw/cppengine/completion`, { body: JSON.stringify({ prompt: 'p', stream: true }) });
    expectSpread(r.chunks, 6);
    expect(r.chunks.at(-1)!.text).toContain('"stop":true');
  });

  it('cancels the upstream request when the client goes away', async () => {
    local.reply = Array.from({ length: 40 }, (_, i) => `w${i}`).join(' ');
    local.behaviour.chunkDelayMs = 50;
    await new Promise<void>((resolve, reject) => {
      const req = httpRequest(`${gw.url}/gw/localrunner/api/chat`, { method: 'POST', agent: false }, (res) => {
        res.once('data', () => {
          req.destroy();
          resolve();
        });
      });
      req.on('error', () => undefined);
      req.end(JSON.stringify({ model: 'test-model', messages: [] }));
      setTimeout(() => reject(new Error('no data')), 3000);
    });
    const deadline = Date.now() + 2000;
    while (local.aborts === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    expect(local.aborts).toBe(1);
    expect(gw.gw.runtime.endpoints.all[0].state).toBe('healthy');
  });
});
