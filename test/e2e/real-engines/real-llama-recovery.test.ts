// Opt-in, against real llama.cpp llama-servers (set GW_LLAMA_SERVER_DIR to the folder holding
// start-llama-server.sh): one is healthy as `type: auto` though it answers 404 at / (no web UI);
// and after a long outage — health checks failed until the next one is a minute away — a
// restarted server's model is served by the first request after it is up (or, within a second of
// a failed try, the one after the Retry-After: 1 it gets; or it was checked as it started, its
// connections knocked on), while another server
// keeps the family routable (the model's own endpoint is the only one down).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { closeAll, endpoint, startGateway, type Started } from '../../helpers/gateway.js';
import { exited, LLAMA_SERVER_DIR, listening, startLlamaServer, stopLlamaServers, type LlamaServer } from '../../helpers/llama-server.js';
import { waitFor } from '../../helpers/wait.js';

describe.skipIf(!LLAMA_SERVER_DIR)('real llama-servers: auto health, and back at once after an outage', () => {
  let back: LlamaServer, steady: LlamaServer, gw: Started;
  beforeAll(async () => {
    back = await startLlamaServer('comes-back');
    steady = await startLlamaServer('stays-up');
    gw = await startGateway({
      discovery: {
        static: {
          endpoints: [
            endpoint('back', 'cppengine', back.url, { check_interval: '5s' }),
            endpoint('steady', 'cppengine', steady.url, { check_interval: '5s' }),
            endpoint('generic', 'auto', steady.url),
          ],
        },
      },
    });
  }, 120_000);
  afterAll(async () => {
    await closeAll(gw, []);
    stopLlamaServers([back, steady]);
  });

  const chat = (prefix: string, model: string) =>
    request(`${gw.url}/gw/${prefix}/v1/chat/completions`, {
      method: 'POST',
      body: JSON.stringify({ model, max_tokens: 2, messages: [{ role: 'user', content: 'hi' }] }),
    });

  it('is healthy as type auto (its / answers 404) and serves through /gw/auto/', async () => {
    expect((await request(`${steady.url}/`)).statusCode).toBe(404);
    expect(gw.gw.runtime.endpoints.all.find((e) => e.name === 'generic')!.state).toBe('healthy');
    const res = await chat('auto', 'stays-up');
    await res.body.dump();
    expect(res.statusCode).toBe(200);
  });

  it('after a long outage, the first request after the restart is answered', async () => {
    const ep = gw.gw.runtime.endpoints.all.find((e) => e.name === 'back')!;
    stopLlamaServers([back]);
    await waitFor(async () => exited(back.pid) && !(await listening(back.port)), 'the stopped llama-server to exit');
    // Failed checks one after another: the backoff grows 5, 10, 20, 40, 60 s.
    for (let i = 0; i < 5; i++) await gw.gw.runtime.health.check(ep);
    expect(ep.state).toBe('offline');
    const down = await chat('cppengine', 'comes-back');
    expect(down.statusCode).toBe(503);
    expect(((await down.body.json()) as any).error.message).toContain(`nothing answered at ${back.url}: start the backend there`);

    back = await startLlamaServer('comes-back', [], back.port);
    // Its scheduled check is a minute away; the gateway's knocking (it refused connections) may
    // have checked it already as it started, or the request below is its last resort: answered either way.
    let res = await chat('cppengine', 'comes-back');
    // Within the breaker's initial period of the failed try above the next waits, and the 503
    // says for how long (1 s): a client that follows Retry-After is answered then.
    if (res.statusCode === 503) {
      expect(res.headers['retry-after']).toBe('1');
      await res.body.dump();
      await new Promise((r) => setTimeout(r, 1000));
      res = await chat('cppengine', 'comes-back');
    }
    const reply = (await res.body.json()) as any;
    expect(res.statusCode).toBe(200);
    expect(reply.model).toBe('comes-back');
    expect([ep.state, ep.consecutiveFailures]).toEqual(['healthy', 0]);
    const next = await chat('cppengine', 'comes-back');
    await next.body.dump();
    expect([next.statusCode, next.headers['x-gw-routing-reason']]).toEqual([200, 'model_found']);
  }, 120_000);
});
