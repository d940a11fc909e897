// Opt-in (GW_LLAMA_SERVER_DIR, see real-llama-server.test.ts): two real llama-servers behind the
// gateway, round-robin with conversation affinity. Ten three-turn conversations, one after
// another: every later turn takes most of its prompt from the server's prompt cache
// (llama.cpp's own timings.cache_n), because each conversation stays on the server that holds it.
// Without affinity, round-robin sends every other turn to the server that has never seen it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { closeAll, endpoint, startGateway, type Started } from '../../helpers/gateway.js';
import { LLAMA_SERVER_DIR, startLlamaServer, stopLlamaServers, type LlamaServer } from '../../helpers/llama-server.js';

const MODEL = 'tiny-chat';

describe.skipIf(!LLAMA_SERVER_DIR)('conversation affinity on two real llama-servers', () => {
  let servers: LlamaServer[] = [];
  let gw: Started;
  let plain: Started;

  beforeAll(async () => {
    servers = await Promise.all([startLlamaServer(MODEL), startLlamaServer(MODEL)]);
    gw = await startGateway({
      proxy: { load_balancer: 'round-robin' },
      discovery: { static: { endpoints: servers.map((s, i) => endpoint(`llama-${i}`, 'cppengine', s.url, { check_interval: '60s' })) } },
    });
    plain = await startGateway({
      proxy: { load_balancer: 'round-robin', affinity: { enabled: false } },
      discovery: { static: { endpoints: servers.map((s, i) => endpoint(`llama-${i}`, 'cppengine', s.url, { check_interval: '60s' })) } },
    });
  }, 120_000);
  afterAll(async () => {
    await closeAll(plain, []);
    await closeAll(gw, []);
    stopLlamaServers(servers);
  });

  /** One turn: the conversation so far plus a question; what the server took from its cache. */
  async function turn(history: { role: string; content: string }[], question: string, through = gw) {
    history.push({ role: 'user', content: question });
    const res = await request(`${through.url}/gw/cppengine/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: MODEL, messages: history, max_tokens: 8, temperature: 0 }),
    });
    const body = (await res.body.json()) as any;
    expect(res.statusCode, JSON.stringify(body)).toBe(200);
    history.push({ role: 'assistant', content: body.choices[0].message.content ?? '' });
    return {
      endpoint: String(res.headers['x-gw-endpoint']),
      affinity: res.headers['x-gw-affinity'],
      cached: body.timings.cache_n as number,
      evaluated: body.timings.prompt_n as number,
    };
  }

  const opening = (c: number) => [
    { role: 'system', content: `Conversation ${c}. ${'You answer questions about the weather in short sentences, and nothing else. '.repeat(12)}` },
  ];

  it('every later turn of every conversation comes mostly from the cache', async () => {
    const later: { cached: number; evaluated: number }[] = [];
    const homes = new Set<string>();
    for (let c = 0; c < 10; c++) {
      const history = opening(c);
      const first = await turn(history, `Is it raining in city number ${c}?`);
      homes.add(first.endpoint);
      for (const q of ['And tomorrow?', 'And the day after?']) {
        const t = await turn(history, q);
        expect(t.endpoint).toBe(first.endpoint);
        expect(t.affinity).toBe('hit');
        later.push(t);
      }
    }
    for (const t of later) expect(t.cached / (t.cached + t.evaluated), JSON.stringify(t)).toBeGreaterThan(0.5);
    expect(homes.size).toBe(2);
    console.log(`later turns: cached ${later.map((t) => `${t.cached}/${t.cached + t.evaluated}`).join(', ')}`);
  }, 180_000);

  it('without affinity (the same servers, plain round-robin) later turns recompute their prompt', async () => {
    let recomputed = 0;
    const later: string[] = [];
    for (let c = 100; c < 110; c++) {
      const history = opening(c);
      await turn(history, `Is it raining in city number ${c}?`, plain);
      for (const q of ['And tomorrow?', 'And the day after?']) {
        const t = await turn(history, q, plain);
        if (t.cached / (t.cached + t.evaluated) < 0.5) recomputed++;
        later.push(`${t.cached}/${t.cached + t.evaluated}`);
      }
    }
    console.log(`without affinity, later turns: cached ${later.join(', ')} (${recomputed} of 20 mostly recomputed)`);
    expect(recomputed).toBeGreaterThan(0);
  }, 180_000);
});
