// What the gateway learns of an endpoint acts on the requests already there: a request waiting
// on an engine that a health check then finds down goes to the healthy peer at once (not after
// the reply timeout), and a stream that stalls there is continued by the peer. The evidence here
// is a check asked for now (POST /internal/endpoints/check), as a scheduled one would find it.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import { FakeBackend } from '../../../engine/demo/index.js';
import { closeAll, endpoint, startGateway, type Started } from '../../helpers/gateway.js';
import { waitFor } from '../../helpers/wait.js';

const REPLY = 'The quick brown fox jumps over the lazy dog while the cat watches from the warm windowsill';
const MODEL = 'Qwen2.5-7B';

let a: FakeBackend, b: FakeBackend, gw: Started;

beforeAll(async () => {
  a = await new FakeBackend({ family: 'pagedengine', name: 'paged-a', models: [{ name: MODEL }], reply: REPLY }).start();
  b = await new FakeBackend({ family: 'pagedengine', name: 'paged-b', models: [{ name: MODEL }], reply: REPLY }).start();
  // Scheduled checks far apart, reply and idle timeouts long: only the check asked for finds paged-a down.
  const ep = (f: FakeBackend, priority: number) =>
    endpoint(f.name, 'pagedengine', f.url, { priority, check_interval: '60s', response_timeout: '120s', stream_idle_timeout: '120s' });
  gw = await startGateway({ discovery: { static: { endpoints: [ep(a, 100), ep(b, 50)] } } });
});
afterAll(() => closeAll(gw, [a, b]));
beforeEach(async () => {
  a.reset();
  b.reset();
  await checkNow('paged-a');
});

const checkNow = async (name: string) => {
  const res = await fetch(`${gw.url}/internal/endpoints/check?endpoint=${name}`, { method: 'POST' });
  return ((await res.json()) as { checked: { status: string }[] }).checked[0].status;
};
const openai = () => new OpenAI({ baseURL: `${gw.url}/gw/pagedengine/v1`, apiKey: 'unused', maxRetries: 0 });
const chatSent = (f: FakeBackend) => f.received.filter((x) => x.url === '/v1/chat/completions');
const accessLog = () => gw.logs.filter((l) => l.msg === 'request' && String(l.path).endsWith('/completions')).at(-1)!;

describe('an endpoint found down while requests wait on it', () => {
  it('a request with no reply yet goes to the peer as soon as a health check fails', async () => {
    a.behaviour.hang = true;
    const answer = openai().chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'hi' }] });
    await waitFor(() => chatSent(a).length > 0, 'the request to reach paged-a');
    a.behaviour.healthStatus = 500;
    expect(await checkNow('paged-a')).toBe('unhealthy');
    expect((await answer).choices[0].message.content).toBe(REPLY);
    expect(chatSent(b)).toHaveLength(1);
    expect(accessLog().tried).toEqual([expect.objectContaining({ endpoint: 'paged-a', outcome: 'abandoned (endpoint unhealthy: health check answered 500)' })]);
  });

  it('a request waiting for a slot there goes to the peer too, once the slot is given back', async () => {
    // One slot each: the first request hangs on paged-a, the second holds paged-b, the third waits for paged-a's slot.
    const limited = (f: FakeBackend, priority: number) =>
      endpoint(f.name, 'pagedengine', f.url, { priority, check_interval: '60s', response_timeout: '120s', max_concurrent_requests: 1 });
    const g = await startGateway({ discovery: { static: { endpoints: [limited(a, 100), limited(b, 50)] } } });
    let release!: () => void;
    try {
      a.behaviour.hang = true;
      b.behaviour.holdUntil = new Promise<void>((r) => (release = r));
      const client = new OpenAI({ baseURL: `${g.url}/gw/pagedengine/v1`, apiKey: 'unused', maxRetries: 0 });
      const ask = () => client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'hi' }] });
      const first = ask();
      await waitFor(() => chatSent(a).length === 1 || undefined, 'the first request on paged-a');
      const second = ask();
      await waitFor(() => chatSent(b).length === 1 || undefined, 'the second request on paged-b');
      const third = ask();
      const queue = g.gw.runtime.endpoints.all.find((e) => e.name === a.name)!.queue!;
      await waitFor(() => queue.queued === 1 || undefined, "the third request waiting for paged-a's slot");
      a.behaviour.healthStatus = 500;
      await fetch(`${g.url}/internal/endpoints/check?endpoint=${a.name}`, { method: 'POST' });
      // The first is given up at paged-a, its slot goes to the third, which moves on too.
      await waitFor(() => queue.queued === 0 || undefined, "paged-a's queue empty");
      release();
      for (const r of await Promise.all([first, second, third])) expect(r.choices[0].message.content).toBe(REPLY);
      expect([chatSent(a).length, chatSent(b).length]).toEqual([1, 3]);
    } finally {
      release?.();
      await closeAll(g, []);
    }
  });

  it('a stream that stalls there after its first words is continued by the peer', async () => {
    a.behaviour.stallAfterChunks = 6; // the role chunk and five words
    const stream = await openai().chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'tell me about the fox' }], stream: true });
    let text = '';
    let checked = false;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta?.content ?? '';
      if (!checked && text.length > 0) {
        checked = true;
        a.behaviour.healthStatus = 500;
        expect(await checkNow('paged-a')).toBe('unhealthy');
      }
    }
    expect(text).toBe(REPLY);
    expect(chatSent(b)).toHaveLength(1);
    expect(accessLog()).toMatchObject({
      endpoint: 'paged-b',
      continuation: 'continued',
      tried: [expect.objectContaining({ endpoint: 'paged-a', outcome: expect.stringContaining('stalled on an endpoint found down (unhealthy') })],
    });
  });
});
