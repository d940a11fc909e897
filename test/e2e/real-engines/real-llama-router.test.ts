// Opt-in, against a real llama.cpp llama-server in router mode (GW_LLAMA_SERVER_DIR = the folder
// holding start-llama-server.sh): three copies of the tiny model under different names in its
// models dir, at most one loaded at a time (--models-max 1). Interleaved requests for the three
// (the pattern A B A A C A B C …) through the gateway, whose endpoint is served by model
// (model_switching), make the router load fewer times than the same pattern sent directly — one
// request at a time, which is the kindest direct client: sent eight at once straight to the
// router, the same pattern got 500s from instances being stopped and requests hung waiting for a
// model never loaded again (recorded while building this: test/fixtures/residency/README.md).
// Skipped unless GW_LLAMA_ROUTER=1 is set too: run it on its own
//   GW_LLAMA_SERVER_DIR=../shared/real-backends GW_LLAMA_ROUTER=1 npx vitest run test/e2e/real-engines/real-llama-router.test.ts
// (the router starts its model instances on ports of its own choosing; beside the other opt-in
// tests' servers, started on ports found free a moment before, one of them failed in a full run).
import { execFileSync } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { endpoint, startGateway, type Started } from '../../helpers/gateway.js';
import { LLAMA_SERVER_DIR, startLlamaRouter, stopLlamaServers, type LlamaRouter } from '../../helpers/llama-server.js';
import { waitFor } from '../../helpers/wait.js';

const PATTERN = 'ABAACABCABACCABA'.split('').map((c) => ({ A: 'alpha', B: 'beta', C: 'gamma' })[c]!);
const CLIENTS = 8;

/** A short streamed chat (the random-weight model's text can fail llama-server's non-streaming check). */
async function ask(base: string, model: string) {
  const res = await request(`${base}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model, stream: true, max_tokens: 4, messages: [{ role: 'user', content: 'hi' }] }),
    headersTimeout: 60_000,
    bodyTimeout: 60_000,
  });
  const text = await res.body.text();
  return { status: res.statusCode, done: text.includes('[DONE]') };
}

function stop(router: LlamaRouter | undefined): void {
  if (!router) return;
  try {
    // Its model instances are its children.
    execFileSync('pkill', ['-P', String(router.pid)]);
  } catch {}
  stopLlamaServers([router]);
}

describe.skipIf(!LLAMA_SERVER_DIR || process.env.GW_LLAMA_ROUTER !== '1')('real llama-server in router mode, one model at a time', () => {
  let direct: LlamaRouter, routed: LlamaRouter;
  let gw: Started;

  beforeAll(async () => {
    direct = await startLlamaRouter(['alpha', 'beta', 'gamma'], 1);
    routed = await startLlamaRouter(['alpha', 'beta', 'gamma'], 1);
    gw = await startGateway({
      discovery: {
        static: { endpoints: [endpoint('router', 'llama.cpp', routed.url, { check_interval: '1s', model_switching: { models_at_once: 1, max_wait: '30s' } })] },
      },
    });
    await waitFor(async () => ((await (await request(`${gw.url}/internal/status/models`)).body.json()) as any).total === 3, 'the three models discovered');
  }, 120_000);

  afterAll(async () => {
    await gw?.close();
    stop(direct);
    stop(routed);
  });

  it('loads fewer times through the gateway than sent directly, and answers every request', async () => {
    // Directly, one at a time: every change of model is a load. (This build's router now and then
    // ends a stream without its [DONE], directly as through the gateway: the answers are counted,
    // their ends are not asserted.)
    for (const model of PATTERN) expect((await ask(direct.url, model)).status).toBe(200);
    const changes = PATTERN.filter((m, i) => i === 0 || m !== PATTERN[i - 1]).length;
    expect(direct.loads()).toBe(changes);

    // Through the gateway, eight clients at once, each going through the pattern from its own place.
    const answers = await Promise.all(
      Array.from({ length: CLIENTS }, async (_, client) => {
        const out = [];
        for (let k = 0; k < 4; k++) out.push(await ask(`${gw.url}/gw/llamacpp`, PATTERN[(client * 3 + k) % PATTERN.length]));
        return out;
      }),
    );
    const flat = answers.flat();
    expect(flat).toHaveLength(CLIENTS * 4);
    expect(flat.filter((a) => a.status !== 200)).toEqual([]);
    expect(routed.loads()).toBeLessThan(direct.loads());
    const status = (await (await request(`${gw.url}/internal/status/endpoints`)).body.json()) as any;
    const turns = status.endpoints[0].queue.model_switching;
    expect(turns.switches).toBeGreaterThan(0);
    console.log(
      `router loads: direct (one at a time, ${PATTERN.length} requests) ${direct.loads()}, through the gateway (${flat.length} requests, ${CLIENTS} clients) ${routed.loads()}; the gateway's switches ${turns.switches}, longest wait ${turns.longest_wait}; streams the router ended without [DONE]: ${flat.filter((a) => !a.done).length}`,
    );
  }, 180_000);
});
