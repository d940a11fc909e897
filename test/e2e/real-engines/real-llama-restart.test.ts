// Opt-in (GW_LLAMA_SERVER_DIR, see real-llama-server.test.ts): two real llama-servers behind the
// gateway with conversation affinity and health checks a minute apart. One is killed and started
// again on its port: its conversations are back on it (X-Gw-Affinity: hit) within 2 s of its
// health route answering — the gateway knocks while it refuses connections and checks it as soon
// as one is accepted — not a backed-off minute later. (Issue 31.)
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { closeAll, endpoint, startGateway, type Started } from '../../helpers/gateway.js';
import { exited, LLAMA_SERVER_DIR, listening, startLlamaServer, stopLlamaServers, type LlamaServer } from '../../helpers/llama-server.js';
import { waitFor } from '../../helpers/wait.js';

const MODEL = 'tiny-chat';

describe.skipIf(!LLAMA_SERVER_DIR)('a real llama-server killed and restarted', () => {
  let servers: LlamaServer[] = [];
  let gw: Started;

  beforeAll(async () => {
    servers = await Promise.all([startLlamaServer(MODEL), startLlamaServer(MODEL)]);
    gw = await startGateway({
      proxy: { load_balancer: 'round-robin' },
      discovery: { static: { endpoints: servers.map((s, i) => endpoint(`llama-${i}`, 'cppengine', s.url, { check_interval: '60s' })) } },
    });
  }, 120_000);
  afterAll(async () => {
    await closeAll(gw, []);
    stopLlamaServers(servers);
  });

  const turn = async (history: { role: string; content: string }[]) => {
    const res = await request(`${gw.url}/gw/cppengine/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: MODEL, messages: history, max_tokens: 4, temperature: 0 }),
    });
    const body = (await res.body.json()) as any;
    expect(res.statusCode, JSON.stringify(body)).toBe(200);
    return { endpoint: String(res.headers['x-gw-endpoint']), affinity: String(res.headers['x-gw-affinity']) };
  };

  it('gets its conversations back within 2 s of answering again', async () => {
    const history = [
      { role: 'system', content: `A conversation that lives on one server. ${'Answer in one word. '.repeat(20)}` },
      { role: 'user', content: 'Hi?' },
    ];
    const home = (await turn(history)).endpoint;
    const i = servers.findIndex((_, k) => `llama-${k}` === home);
    const server = servers[i];
    process.kill(server.pid, 'SIGKILL');
    await waitFor(async () => exited(server.pid) && !(await listening(server.port)), 'the killed llama-server gone');
    const ep = gw.gw.runtime.endpoints.all.find((e) => e.name === home)!;
    // Moved meanwhile (its home is down), answered by the other server.
    const moved = await turn(history);
    expect(moved.endpoint).not.toBe(home);
    await waitFor(() => ep.state === 'offline' || undefined, 'the killed server seen offline');
    servers[i] = await startLlamaServer(MODEL, [], server.port);
    // startLlamaServer resolves once its /health answers: from then on, within 2 s.
    const answered = Date.now();
    await waitFor(() => ep.routable || undefined, 'the restarted server routable again');
    const back = await turn(history);
    const tookMs = Date.now() - answered;
    console.log(`back on its home ${tookMs} ms after its health route answered`);
    expect([back.endpoint, back.affinity]).toEqual([home, 'hit']);
    expect(tookMs).toBeLessThan(2_000);
  }, 180_000);
});
