// X-Radix-Spec-Decode and X-Radix-Cache-Hit on radixengine replies: speculative decoding from the
// endpoint's model list, the prefix cache from the engine's header or a non-streaming JSON reply
// body's tail (metrics.radix_cache_hit_rate, meta.radix_cache_hit) on generation routes; streams
// and other routes (embeddings) are never held back for them.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { FakeBackend } from '../../../engine/demo/index.js';
import { cacheHitIn, TAIL_BYTES } from '../../../plugins/replies/radix-headers.js';
import { closeAll, endpoint, startGateway, type Started } from '../../helpers/gateway.js';
import { lockstep } from '../../helpers/http.js';

let radix: FakeBackend, plain: FakeBackend, paged: FakeBackend, gw: Started;

beforeAll(async () => {
  radix = await new FakeBackend({ family: 'radixengine', name: 'radix', models: [{ name: 'Qwen2.5-7B' }] }).start();
  radix.speculativeDecoding = true;
  plain = await new FakeBackend({ family: 'radixengine', name: 'plain', models: [{ name: 'Llama-8B' }] }).start();
  paged = await new FakeBackend({ family: 'pagedengine', name: 'paged', models: [{ name: 'Qwen2.5-7B' }] }).start();
  // `plain` has a lower priority: requests that name no model (generate) go to `radix`.
  gw = await startGateway({
    discovery: {
      static: {
        endpoints: [
          endpoint('radix', 'radixengine', radix.url),
          endpoint('plain', 'radixengine', plain.url, { priority: 1 }),
          endpoint('paged', 'pagedengine', paged.url),
        ],
      },
    },
  });
});
afterAll(() => closeAll(gw, [radix, plain, paged]));
beforeEach(() =>
  [radix, plain, paged].forEach((f) => {
    const spec = f.speculativeDecoding;
    f.reset();
    f.speculativeDecoding = spec;
  }),
);

const post = async (path: string, body: unknown) => {
  const res = await request(`${gw.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const text = await res.body.text();
  return { status: res.statusCode, headers: res.headers, text };
};
const chat = (model: string, content: string, stream = false) => ({ model, messages: [{ role: 'user', content }], stream });

describe('X-Radix-* headers', () => {
  it('say whether the prefix cache was hit (from the reply body) and whether speculative decoding is on', async () => {
    const first = await post('/gw/radixengine/v1/chat/completions', chat('Qwen2.5-7B', 'a long shared prefix'));
    expect(first.status).toBe(200);
    expect(first.headers).toMatchObject({ 'x-radix-cache-hit': 'false', 'x-radix-spec-decode': 'true' });
    const again = await post('/gw/radixengine/v1/chat/completions', chat('Qwen2.5-7B', 'a long shared prefix'));
    expect(again.headers).toMatchObject({ 'x-radix-cache-hit': 'true', 'x-radix-spec-decode': 'true' });
    // The body is the engine's, byte for byte.
    expect(JSON.parse(again.text).metrics).toEqual({ time_to_first_token_ms: 12, generation_time_ms: 40, radix_cache_hit_rate: 0.93 });
    expect(again.headers['content-length']).toBe(String(Buffer.byteLength(again.text)));
  });

  it('read the native generate reply (meta.radix_cache_hit); the endpoint reports speculative decoding off', async () => {
    const gen = { text: 'The capital of France is', sampling_params: { max_new_tokens: 8 } };
    expect((await post('/gw/radixengine/generate', gen)).headers).toMatchObject({ 'x-radix-cache-hit': 'false', 'x-radix-spec-decode': 'true' });
    expect((await post('/gw/radixengine/generate', gen)).headers['x-radix-cache-hit']).toBe('true');
    const off = await post('/gw/radixengine/v1/completions', { model: 'Llama-8B', prompt: 'hi' });
    expect(off.headers).toMatchObject({ 'x-gw-endpoint': 'plain', 'x-radix-spec-decode': 'false', 'x-radix-cache-hit': 'false' });
  });

  it("keep the engine's own cache header", async () => {
    radix.behaviour.replyHeaders = { 'x-radix-cache-hit': 'true' };
    const res = await post('/gw/radixengine/v1/chat/completions', chat('Qwen2.5-7B', 'never seen'));
    expect(res.headers['x-radix-cache-hit']).toBe('true');
  });

  it('never hold a stream back: it is relayed piece by piece, with the spec-decode header only', async () => {
    const { status, headers, pieces } = await lockstep(
      radix,
      `${gw.url}/gw/radixengine/v1/chat/completions`,
      JSON.stringify(chat('Qwen2.5-7B', 'stream me', true)),
      '\n\n',
      1,
    );
    expect(status).toBe(200);
    expect(pieces.at(-1)).toBe('data: [DONE]\n\n');
    expect(headers['x-radix-spec-decode']).toBe('true');
    expect(headers['x-radix-cache-hit']).toBeUndefined();
  });

  it('hold back generation replies only: an embeddings reply is piped, so a break after its head reaches the client as a cut body', async () => {
    radix.behaviour.cutBodyAt = 20;
    const res = await request(`${gw.url}/gw/radixengine/v1/embeddings`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'Qwen2.5-7B', input: 'hello' }),
    });
    // Held whole it would have been answered 502 before any byte; piped, the head came first.
    expect(res.statusCode).toBe(200);
    expect(res.headers['x-radix-spec-decode']).toBe('true');
    expect(res.headers['x-radix-cache-hit']).toBeUndefined();
    await expect(res.body.text()).rejects.toThrow();
  });

  it('find the report at the end of a long reply', async () => {
    radix.reply = 'word '.repeat(100_000);
    const res = await post('/gw/radixengine/v1/chat/completions', chat('Qwen2.5-7B', 'tell me everything'));
    expect(res.text.length).toBeGreaterThan(500_000);
    expect(res.headers['x-radix-cache-hit']).toBe('false');
    expect(JSON.parse(res.text).choices[0].message.content).toBe(radix.reply);
  });

  it("are radixengine's only", async () => {
    const res = await post('/gw/pagedengine/v1/chat/completions', chat('Qwen2.5-7B', 'hi'));
    expect(res.status).toBe(200);
    expect(res.headers['x-radix-cache-hit']).toBeUndefined();
    expect(res.headers['x-radix-spec-decode']).toBeUndefined();
  });
});

describe('reading the cache out of a reply body', () => {
  it('finds the real keys only, never text that looks like them', () => {
    expect(cacheHitIn(Buffer.from('{"batch_meta":{"avg_radix_cache_hit_rate":0.5},"responses":[{"meta":{"radix_cache_hit":false}}]}'))).toBe(true);
    expect(cacheHitIn(Buffer.from('{"metrics":{"radix_cache_hit_rate":0.0}}'))).toBe(false);
    expect(cacheHitIn(Buffer.from(JSON.stringify({ choices: [{ message: { content: '"radix_cache_hit": true' } }] })))).toBeUndefined();
    expect(cacheHitIn(Buffer.from('{"id":"x"}'))).toBeUndefined();
  });

  it("ranks the reports in the tail: the batch average over one reply's flag over a rate", () => {
    const batch = {
      responses: [
        { text: 'a', meta: { radix_cache_hit: true } },
        { text: 'b', meta: { radix_cache_hit: true } },
      ],
      batch_meta: { total_requests: 2, avg_radix_cache_hit_rate: 0 },
    };
    expect(cacheHitIn(Buffer.from(JSON.stringify(batch)))).toBe(false);
    expect(cacheHitIn(Buffer.from('{"meta":{"radix_cache_hit":true},"metrics":{"radix_cache_hit_rate":0}}'))).toBe(true);
  });

  it(`reads only the last ${TAIL_BYTES} bytes, where the engine puts its reports`, () => {
    const text = 'x'.repeat(TAIL_BYTES * 4);
    expect(cacheHitIn(Buffer.from(JSON.stringify({ text, meta: { radix_cache_hit: true } })))).toBe(true);
    // A report before a long payload is not looked for: no header rather than a scan of the whole reply.
    expect(cacheHitIn(Buffer.from(JSON.stringify({ meta: { radix_cache_hit: true }, text })))).toBeUndefined();
    // A tail that starts inside the generated text cannot be fooled by it either.
    const tricky = JSON.stringify({ text: `${text}"radix_cache_hit": true`, meta: { id: 'x' } });
    expect(cacheHitIn(Buffer.from(tricky))).toBeUndefined();
  });
});
