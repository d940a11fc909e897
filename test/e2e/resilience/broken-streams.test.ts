// A reply that breaks after its head reached the client: streams end with an error in their own
// format (the official clients raise it), other replies are aborted; either way it counts as an
// upstream failure.
import Anthropic from '@anthropic-ai/sdk';
import { Ollama } from 'ollama';
import OpenAI from 'openai';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { connect } from 'node:net';
import { request } from 'undici';
import { FakeBackend } from '../../../engine/demo/index.js';
import { closeAll, endpoint, startGateway, type Started } from '../../helpers/gateway.js';
import { rawRequest, timedChunks } from '../../helpers/http.js';

let paged: FakeBackend, local: FakeBackend, gw: Started;
beforeAll(async () => {
  paged = await new FakeBackend({ family: 'pagedengine', name: 'paged', reply: 'one two three four five six' }).start();
  local = await new FakeBackend({ family: 'localrunner', name: 'local', reply: 'one two three four five six' }).start();
  gw = await startGateway({
    proxy: { stream_idle_timeout: '2s' },
    discovery: {
      static: {
        endpoints: [
          endpoint('paged', 'pagedengine', paged.url, { check_interval: '60s' }),
          endpoint('local', 'localrunner', local.url, { check_interval: '60s' }),
        ],
      },
    },
  });
});
afterAll(() => closeAll(gw, [paged, local]));
afterEach(() => {
  paged.reset();
  local.reset();
  for (const ep of gw.gw.runtime.endpoints.all) ep.breaker.success({ probe: true });
});

const chat = (stream: boolean) => JSON.stringify({ model: 'test-model', messages: [{ role: 'user', content: 'hi' }], stream });
const sseEvents = (text: string) => text.split('\n\n').filter(Boolean);

/** Send one keep-alive request on a raw socket; resolves when the gateway closes the connection. */
function closedAfterReply(path: string, body: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(gw.gw.port, '127.0.0.1');
    let text = '';
    socket.on('data', (d) => (text += d));
    socket.on('end', () => resolve(text));
    socket.on('error', reject);
    socket.write(
      `POST ${path} HTTP/1.1\r\nHost: gw\r\nConnection: keep-alive\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
    );
  });
}

describe('an SSE stream that breaks', () => {
  it('ends with a chat-completions error chunk after the backend died, then the connection closes', async () => {
    paged.behaviour.resetAfterChunks = 2;
    const r = await timedChunks(`${gw.url}/gw/pagedengine/v1/chat/completions`, { body: chat(true) });
    expect(r.status).toBe(200);
    expect(r.error).toBeUndefined();
    const events = sseEvents(r.chunks.map((c) => c.text).join(''));
    expect(events.slice(0, -1).every((e) => JSON.parse(e.slice('data: '.length)).object === 'chat.completion.chunk')).toBe(true);
    const last = JSON.parse(events.at(-1)!.slice('data: '.length));
    expect(last.error).toMatchObject({ type: 'bad_gateway', code: 'UPSTREAM_STREAM_BROKEN' });
    expect(last.error.message).toContain('endpoint paged broke off the reply');
    expect(events.join('')).not.toContain('[DONE]');
  });

  it('closes the connection after the error chunk, though the client asked to keep it alive', async () => {
    paged.behaviour.resetAfterChunks = 2;
    const text = await closedAfterReply('/gw/pagedengine/v1/chat/completions', chat(true));
    expect(text).toMatch(/^connection: keep-alive\r$/im);
    expect(text).toContain('UPSTREAM_STREAM_BROKEN');
  });

  it('ends with the same chunk when the backend goes silent past stream_idle_timeout', async () => {
    paged.behaviour.stallAfterChunks = 2;
    const r = await timedChunks(`${gw.url}/gw/pagedengine/v1/chat/completions`, { body: chat(true) });
    const last = JSON.parse(
      sseEvents(r.chunks.map((c) => c.text).join(''))
        .at(-1)!
        .slice('data: '.length),
    );
    expect(last.error.message).toContain('sent nothing for 2s, stream_idle_timeout from proxy.stream_idle_timeout');
  });

  it('makes the openai client raise the error instead of hanging or ending quietly', async () => {
    paged.behaviour.stallAfterChunks = 2;
    const client = new OpenAI({ baseURL: `${gw.url}/gw/pagedengine/v1`, apiKey: 'sk-test', maxRetries: 0 });
    const stream = await client.chat.completions.create({ model: 'test-model', messages: [{ role: 'user', content: 'hi' }], stream: true });
    let text = '';
    const err = await (async () => {
      for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? '';
    })().catch((e) => e);
    expect(err).toBeInstanceOf(OpenAI.APIError);
    expect(err.message).toContain('sent nothing for 2s');
    expect(text.length).toBeGreaterThan(0);
  });

  it('speaks the messages API on msgapi routes: event: error, which the anthropic client raises', async () => {
    paged.behaviour.resetAfterChunks = 3;
    const client = new Anthropic({ baseURL: `${gw.url}/gw/msgapi`, apiKey: 'sk-ant-test', maxRetries: 0 });
    // A model only the paged engine serves (msgapi routes span every family).
    const err = await client.messages
      .stream({ model: 'pagedengine-model-1', max_tokens: 64, messages: [{ role: 'user', content: 'hi' }] })
      .finalMessage()
      .catch((e) => e);
    expect(err).toBeInstanceOf(Anthropic.APIError);
    expect(String(err.message)).toContain('endpoint paged broke off the reply');
    const raw = await timedChunks(`${gw.url}/gw/msgapi/v1/messages`, {
      body: JSON.stringify({ model: 'pagedengine-model-1', max_tokens: 64, stream: true, messages: [{ role: 'user', content: 'hi' }] }),
    });
    expect(raw.headers['x-gw-mode']).toBe('passthrough');
    const last = sseEvents(raw.chunks.map((c) => c.text).join('')).at(-1)!;
    expect(last.startsWith('event: error\ndata: ')).toBe(true);
    expect(JSON.parse(last.split('\ndata: ')[1])).toMatchObject({ type: 'error', error: { code: 'UPSTREAM_STREAM_BROKEN' } });
  });
});

describe('an NDJSON stream that breaks', () => {
  it('ends with an {"error": …} line, which the ollama client raises', async () => {
    local.behaviour.resetAfterChunks = 2;
    const ollama = new Ollama({ host: `${gw.url}/gw/localrunner` });
    let text = '';
    const err = await (async () => {
      for await (const part of await ollama.chat({ model: 'test-model', messages: [{ role: 'user', content: 'hi' }], stream: true }))
        text += part.message.content;
    })().catch((e) => e);
    expect(err).toBeInstanceOf(Error);
    expect(String(err.message)).toContain('endpoint local broke off the reply');
    expect(text).toBe('one two');
  });
});

describe('a reply that is not a stream', () => {
  it('is aborted when its body breaks after the head went out', async () => {
    paged.behaviour.cutBodyAt = 10;
    const r = await timedChunks(`${gw.url}/gw/pagedengine/v1/chat/completions`, { body: chat(false) });
    expect(r.status).toBe(200);
    expect(r.error).toBeDefined();
  });
});

describe('accounting', () => {
  it('counts a broken stream as an upstream failure: status statistics, endpoint errors and the breaker', async () => {
    const before = (await (await request(`${gw.url}/internal/status`)).body.json()) as any;
    paged.behaviour.resetAfterChunks = 2;
    await timedChunks(`${gw.url}/gw/pagedengine/v1/chat/completions`, { body: chat(true) });
    // The stats step runs when the reply closed; read after it did.
    const after = (await (await request(`${gw.url}/internal/status`)).body.json()) as any;
    expect(after.statistics.requests_failed).toBe(before.statistics.requests_failed + 1);
    expect(after.endpoints.paged.errors).toBe(before.endpoints.paged.errors + 1);
    expect(gw.gw.runtime.endpoints.all[0].breaker.proxyFailures).toBe(1);
    expect(gw.logs.some((l) => l.msg === 'the reply broke off after it had started' && l.endpoint === 'paged')).toBe(true);
  });

  it('leaves a healthy stream alone', async () => {
    const r = await rawRequest(`${gw.url}/gw/pagedengine/v1/chat/completions`, { method: 'POST', body: chat(true) });
    expect(r.body.trim().endsWith('data: [DONE]')).toBe(true);
  });
});
