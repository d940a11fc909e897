// Streams are relayed event by event as the backend sends them, and a client that leaves
// cancels the upstream request.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { request as httpRequest } from 'node:http';
import { FakeBackend } from '../../../engine/demo/index.js';
import { endpoint, startGateway, type Started } from '../../helpers/gateway.js';
import { lockstep } from '../../helpers/http.js';
import { waitFor } from '../../helpers/wait.js';

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

describe('streaming relay', () => {
  // In lock-step (helpers/http.ts): the backend sends each event only after the client has the
  // previous one, so a relay that held back the head or batched events would stall the stream.
  // The head and the role-only first chunk wait for the first content (so the request can still
  // fail over until then), then go out with it.
  it('relays chat-completions SSE events one by one, the head with the first content', async () => {
    const r = await lockstep(
      local,
      `${gw.url}/gw/localrunner/v1/chat/completions`,
      JSON.stringify({ model: 'test-model', messages: [], stream: true }),
      '\n\n',
      1,
    );
    expect(r.status).toBe(200);
    expect(r.headers['content-type']).toBe('text/event-stream');
    expect(r.pieces.length).toBeGreaterThanOrEqual(7);
    expect(r.pieces[0]).toMatch(/^data: \{.*"role":"assistant"/);
    expect(r.pieces.at(-1)).toBe('data: [DONE]\n\n');
  });

  it('relays native NDJSON lines one by one', async () => {
    const r = await lockstep(local, `${gw.url}/gw/localrunner/api/generate`, JSON.stringify({ model: 'test-model', prompt: 'p' }), '\n');
    expect(r.headers['content-type']).toBe('application/x-ndjson');
    const lines = r.pieces.map((c) => JSON.parse(c));
    expect(lines.map((l) => l.response).join('')).toBe('alpha beta gamma delta epsilon');
    expect(lines.at(-1).done).toBe(true);
  });

  it('relays native SSE of the C++ engine', async () => {
    const r = await lockstep(cpp, `${gw.url}/gw/cppengine/completion`, JSON.stringify({ prompt: 'p', stream: true }), '\n\n');
    expect(r.pieces.length).toBeGreaterThanOrEqual(6);
    expect(r.pieces.at(-1)).toContain('"stop":true');
  });

  it('cancels the upstream request when the client goes away', async () => {
    local.reply = Array.from({ length: 40 }, (_, i) => `w${i}`).join(' ');
    local.behaviour.chunkDelayMs = 50;
    await new Promise<void>((resolve) => {
      const req = httpRequest(`${gw.url}/gw/localrunner/api/chat`, { method: 'POST', agent: false }, (res) => {
        res.once('data', () => {
          req.destroy();
          resolve();
        });
      });
      req.on('error', () => undefined);
      req.end(JSON.stringify({ model: 'test-model', messages: [] }));
    });
    await waitFor(() => local.aborts === 1, 'the backend to see its reply abandoned');
    expect(gw.gw.runtime.endpoints.all[0].state).toBe('healthy');
  });
});
