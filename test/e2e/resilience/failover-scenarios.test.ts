// Two scenarios of the public failoverbench catalogue (S07, S14), on a provider of our own that
// misbehaves by model name as its "wall" does: one hosted endpoint serving the faulty models and
// their fallbacks, declared able to continue a chat answer.
// - S07, slow first token: headers at once, the first token 20 s later. The fallback answers
//   before that first token is let go: the endpoint's recent streams taught the gateway a
//   first-token deadline (3 s).
// - S14, the fallback rejects a prefill: the primary's stream is cut after its first words; the
//   fallback refuses the continuation's trailing assistant message (400), so the answer is asked
//   for again there from its start, and the client gets the whole answer, never the 400.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeAll, endpoint, startGateway, type Started } from '../../helpers/gateway.js';
import { customProfiles } from '../../helpers/profiles.js';

const ANSWER = 'A gateway earns trust only when the provider behind it misbehaves and the caller never notices a thing';
const WORDS = ANSWER.split(' ');

let wall: Server;
let gw: Started;
/** What the wall was asked: model, and whether the last message was an assistant prefill. */
const asked: { model: string; prefill: boolean }[] = [];
let releaseSlow: () => void = () => undefined;

function startWall(): Promise<string> {
  wall = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', async () => {
      if (req.url === '/v1/models') {
        res.setHeader('content-type', 'application/json');
        return res.end(JSON.stringify({ object: 'list', data: ['fb-ok', 'fb-slow', 'fb-cut', 'fb-noprefill'].map((id) => ({ id, object: 'model' })) }));
      }
      if (req.method !== 'POST' || req.url !== '/v1/chat/completions') return res.end(req.url === '/health' ? 'ok' : '');
      const json = JSON.parse(body);
      const last = json.messages.at(-1);
      const prefill = last.role === 'assistant';
      asked.push({ model: json.model, prefill });
      if (prefill && json.model === 'fb-noprefill') {
        res.writeHead(400, { 'content-type': 'application/json' });
        return res.end(JSON.stringify({ error: { message: 'This model does not support assistant message prefill.', type: 'invalid_request_error' } }));
      }
      // A prefill the model takes: the rest of the answer after it.
      const words = prefill ? ANSWER.slice(last.content.trim().length).split(' ').filter(Boolean) : WORDS;
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      // Its head at once, as the wall sends it.
      res.flushHeaders();
      const send = (delta: object, finish: string | null = null) =>
        res.write(
          `data: ${JSON.stringify({ id: 'chatcmpl-wall', object: 'chat.completion.chunk', model: json.model, choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`,
        );
      if (json.model === 'fb-slow') await new Promise<void>((r) => (releaseSlow = r));
      send({ role: 'assistant', content: '' });
      for (const [i, w] of words.entries()) {
        if (json.model === 'fb-cut' && i === 8) return res.socket?.destroy();
        send({ content: i > 0 || prefill ? ` ${w}` : w });
        // A token at a time, as the wall streams them (5 ms apart).
        await new Promise((r) => setTimeout(r, 5));
      }
      send({}, 'stop');
      res.end('data: [DONE]\n\n');
    });
  });
  return new Promise((r) => wall.listen(0, '127.0.0.1', () => r(`http://127.0.0.1:${(wall.address() as AddressInfo).port}`)));
}

beforeAll(async () => {
  const url = await startWall();
  gw = await startGateway({
    model_fallbacks: { 'fb-slow': ['fb-ok'], 'fb-cut': ['fb-noprefill'] },
    // A hosted service declared able to continue a trailing assistant message (as failoverbench's runs declare it).
    proxy: { profiles_dir: customProfiles({ 'hosted-compatible': (p) => (p.api.continuation.routes['/v1/chat/completions'] = 'chat') }) },
    discovery: { static: { endpoints: [endpoint('wall', 'hosted-compatible', url, { check_interval: '60s' })] } },
  });
});
afterAll(async () => {
  releaseSlow();
  await closeAll(gw, []);
  await new Promise((r) => wall.close(r));
});

const openai = () => new OpenAI({ baseURL: `${gw.url}/gw/hosted-compatible/v1`, apiKey: 'unused', maxRetries: 0 });
async function ask(model: string) {
  let text = '';
  let answeredBy = '';
  const stream = await openai().chat.completions.create({ model, messages: [{ role: 'user', content: 'Explain trust.' }], stream: true });
  for await (const chunk of stream) {
    text += chunk.choices[0]?.delta?.content ?? '';
    answeredBy = chunk.model;
  }
  return { text, answeredBy };
}
const accessLog = () => gw.logs.filter((l) => l.msg === 'request' && String(l.path).endsWith('/completions')).at(-1)!;

describe('failoverbench S07 and S14, on a misbehaving provider of our own', () => {
  it('S07, a slow first token: the fallback answers while the first token is still to come', async () => {
    for (let i = 0; i < 3; i++) expect((await ask('fb-ok')).text).toBe(ANSWER);
    asked.length = 0;
    const r = await ask('fb-slow');
    // The slow stream is let go only now: the answer came before its first token.
    releaseSlow();
    expect(r).toEqual({ text: ANSWER, answeredBy: 'fb-ok' });
    expect(asked.map((a) => a.model)).toEqual(['fb-slow', 'fb-ok']);
    expect(accessLog().tried).toEqual([expect.objectContaining({ model: 'fb-slow', outcome: 'first_token_timeout (3s, learned)' })]);
  });

  it('S14, a fallback that rejects a prefill: the answer restarted there, and the whole of it reaches the client', async () => {
    asked.length = 0;
    expect((await ask('fb-cut')).text).toBe(ANSWER);
    expect(asked).toEqual([
      { model: 'fb-cut', prefill: false },
      { model: 'fb-noprefill', prefill: true },
      { model: 'fb-noprefill', prefill: false },
    ]);
    expect(accessLog()).toMatchObject({ continuation: 'continued' });
  });
});
