// Opt-in (GW_LLAMA_SERVER_DIR, see real-llama-server.test.ts): two real llama-servers behind the
// gateway, the first preferred. It is stopped with SIGSTOP (a hung engine: its socket still
// accepts, nothing answers) and a request sent to it: the next health check times out, the
// endpoint is found down, and the request is answered by the other server within the check's
// interval + timeout + 1 s, not after the reply timeout. (Issue 31.)
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { closeAll, endpoint, startGateway, type Started } from '../../helpers/gateway.js';
import { LLAMA_SERVER_DIR, startLlamaServer, stopLlamaServers, type LlamaServer } from '../../helpers/llama-server.js';

const MODEL = 'tiny-chat';
const INTERVAL_MS = 2_000;
const TIMEOUT_MS = 1_000;

describe.skipIf(!LLAMA_SERVER_DIR)('a real llama-server that hangs under a request', () => {
  let servers: LlamaServer[] = [];
  let gw: Started;

  beforeAll(async () => {
    servers = await Promise.all([startLlamaServer(MODEL), startLlamaServer(MODEL)]);
    const ep = (s: LlamaServer, i: number) =>
      endpoint(`llama-${i}`, 'cppengine', s.url, { priority: 100 - i, check_interval: `${INTERVAL_MS}ms`, check_timeout: `${TIMEOUT_MS}ms` });
    gw = await startGateway({ proxy: { load_balancer: 'priority' }, discovery: { static: { endpoints: servers.map(ep) } } });
  }, 120_000);
  afterAll(async () => {
    for (const s of servers) process.kill(s.pid, 'SIGCONT');
    await closeAll(gw, []);
    stopLlamaServers(servers);
  });

  const ask = async () => {
    const res = await request(`${gw.url}/gw/cppengine/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'Hi?' }], max_tokens: 4, temperature: 0 }),
    });
    const body = (await res.body.json()) as any;
    expect(res.statusCode, JSON.stringify(body)).toBe(200);
    return String(res.headers['x-gw-endpoint']);
  };

  it('answers from the other server within interval + timeout + 1 s', async () => {
    expect(await ask()).toBe('llama-0');
    process.kill(servers[0].pid, 'SIGSTOP');
    const stopped = Date.now();
    expect(await ask()).toBe('llama-1');
    const tookMs = Date.now() - stopped;
    console.log(`answered by the other server ${tookMs} ms after the first was stopped`);
    expect(tookMs).toBeLessThan(INTERVAL_MS + TIMEOUT_MS + 1_000);
    const log = gw.logs.filter((l) => l.msg === 'request' && String(l.path).endsWith('/completions')).at(-1)!;
    expect(log.tried).toEqual([expect.objectContaining({ endpoint: 'llama-0', outcome: expect.stringMatching(/^abandoned \(endpoint offline: timed out\)/) })]);
  }, 60_000);
});
