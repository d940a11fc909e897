// Opt-in: token accounting per key in front of a real llama.cpp llama-server (GW_LLAMA_SERVER_DIR
// names ../shared/real-backends/). What /internal/usage counts agrees with what the engine itself
// reports in its replies' `timings` — the prompt tokens it evaluated and found cached, the tokens
// it predicted — for a whole reply, a stream the client asked usage of, and one it did not (the
// gateway asks on its behalf and keeps the extra event from it), and the engine's native
// /completion.
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keyHash } from '../../../engine/core/keys.js';
import { closeAll, endpoint, NO_RATE_LIMITS, startGateway, type Started } from '../../helpers/gateway.js';
import { LLAMA_SERVER_DIR, startLlamaServer, stopLlamaServers, type LlamaServer } from '../../helpers/llama-server.js';

const OPS = 'gw-ops-secret-llama';
const USER = 'gw-user-secret-llama';

describe.skipIf(!LLAMA_SERVER_DIR)('token accounting in front of a real llama-server', () => {
  let llama: LlamaServer, gw: Started;
  beforeAll(async () => {
    llama = await startLlamaServer('tiny-a');
    gw = await startGateway({
      auth: {
        keys: [
          { name: 'ops', hash: keyHash(OPS) },
          { name: 'user', hash: keyHash(USER) },
        ],
        admin: ['ops'],
      },
      server: { rate_limits: NO_RATE_LIMITS },
      discovery: { static: { endpoints: [endpoint('llama', 'cppengine', llama.url)] } },
    });
  }, 120_000);
  afterAll(async () => {
    await closeAll(gw, []);
    stopLlamaServers([llama]);
  });

  const post = async (path: string, body: object) => {
    const res = await request(`${gw.url}/gw/cppengine${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${USER}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    return res.body.text();
  };
  const total = async () => {
    const res = await request(`${gw.url}/internal/usage?key=user`, { headers: { authorization: `Bearer ${OPS}` } });
    return ((await res.body.json()) as any).keys.user.total.models['tiny-a'];
  };
  const events = (text: string) =>
    text
      .split('\n')
      .filter((l) => l.startsWith('data: ') && l !== 'data: [DONE]')
      .map((l) => JSON.parse(l.slice(6)));
  const messages = [{ role: 'user', content: 'Tell me something about the sea and the sky.' }];

  it('agrees with the timings the engine reported, whole, streamed and native', async () => {
    const expected = { input: 0, cached: 0, output: 0 };
    const add = (t: { prompt_n: number; cache_n: number; predicted_n: number }) => {
      expected.input += t.prompt_n + t.cache_n;
      expected.cached += t.cache_n;
      expected.output += t.predicted_n;
    };
    add(JSON.parse(await post('/v1/chat/completions', { model: 'tiny-a', messages, max_tokens: 12 })).timings);
    const asked = events(
      await post('/v1/chat/completions', { model: 'tiny-a', messages, max_tokens: 12, stream: true, stream_options: { include_usage: true } }),
    );
    add(asked.find((e) => e.timings)!.timings);
    // Not asked: the client gets no usage event; the count is the engine's all the same.
    const before = await total();
    const plain = events(await post('/v1/chat/completions', { model: 'tiny-a', messages, max_tokens: 12, stream: true }));
    expect(plain.some((e) => e.usage)).toBe(false);
    const after = await total();
    expect(after.estimated_tokens).toBe(before.estimated_tokens);
    expect(after.output_tokens - before.output_tokens).toBeGreaterThan(0);
    expected.input += after.input_tokens - before.input_tokens;
    expected.cached += after.cached_input_tokens - before.cached_input_tokens;
    expected.output += after.output_tokens - before.output_tokens;
    const nativeText = await post('/completion', { model: 'tiny-a', prompt: 'The sea is', n_predict: 8, stream: true });
    const native = events(nativeText).find((e) => e.stop);
    add(native.timings);
    expect(await total()).toMatchObject({
      requests: 4,
      input_tokens: expected.input,
      cached_input_tokens: expected.cached,
      output_tokens: expected.output,
      estimated_tokens: 0,
    });
  });
});
