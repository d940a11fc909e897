// One GPU, many models (issue 34): an engine that holds one model at a time (the fake's GPU:
// engine/demo/gpu.ts) behind an endpoint with model_switching. Its queue serves the held model's
// requests first and switches in batches, so the engine loads fewer times than in arrival order;
// a switch is a cold load, not a failure: a first-token deadline allows for it, and a health check
// that fails while the engine loads does not take the endpoint out.
import { afterEach, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { FakeBackend } from '../../../engine/demo/index.js';
import { closeAll, endpoint, startGateway, type Started } from '../../helpers/gateway.js';
import { gate, waitFor } from '../../helpers/wait.js';

let gw: Started | null = null;
let fake: FakeBackend | null = null;
let prefix = 'ollama';
afterEach(async () => {
  await closeAll(gw, fake ? [fake] : []);
  [gw, fake] = [null, null];
});

/** `family`: an Ollama reports what it holds (api/ps); a vLLM-style engine does not, and the
 *  queue's own knowledge of the switch is all there is. */
async function oneGpu(switchMs: number, extra: Record<string, unknown>, modelSwitching: Record<string, unknown> | null, family = 'localrunner') {
  fake = await new FakeBackend({ family, name: 'gpu', models: [{ name: 'alpha' }, { name: 'beta' }], modelsAtOnce: 1, switchMs }).start();
  prefix = family === 'localrunner' ? 'ollama' : family;
  gw = await startGateway({
    discovery: {
      static: {
        endpoints: [endpoint('gpu', family, fake.url, { ...extra, ...(modelSwitching ? { model_switching: modelSwitching } : {}) })],
      },
    },
  });
  await waitFor(async () => (await queueOf())?.model_switching !== undefined, 'the endpoint up');
}

async function chat(model: string, stream = false) {
  const res = await request(`${gw!.url}/gw/${prefix}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model, stream, messages: [{ role: 'user', content: 'hi' }] }),
  });
  const text = await res.body.text();
  return { status: res.statusCode, text };
}

async function endpointStatus() {
  const res = await request(`${gw!.url}/internal/status/endpoints`);
  const json = (await res.body.json()) as { endpoints: Record<string, any>[] };
  return json.endpoints[0];
}
const queueOf = async () => (await endpointStatus())?.queue;

/** The models of the generation requests the engine received, in order. */
const served = () => fake!.traffic.map((r) => r.json.model);

/** alpha held at the engine, then beta alpha beta alpha waiting behind it (one at a time), then
 *  all let go: their answers. */
async function interleaved() {
  const hold = gate();
  fake!.behaviour.holdUntil = hold.promise;
  const first = chat('alpha');
  await waitFor(() => fake!.traffic.length === 1, 'alpha at the engine');
  const rest = ['beta', 'alpha', 'beta', 'alpha'].map((m) => chat(m));
  await waitFor(async () => (await queueOf()).queued === 4, 'four waiting');
  const waiting = (await queueOf()).model_switching;
  fake!.behaviour.holdUntil = null;
  hold.open();
  return { waiting, answers: await Promise.all([first, ...rest]) };
}

describe('a queue served by model', () => {
  it('sends the held model’s waiting requests first and switches once: two loads where arrival order makes five', async () => {
    await oneGpu(0, { max_concurrent_requests: 1 }, { models_at_once: 1 });
    const { waiting, answers } = await interleaved();
    expect(waiting).toMatchObject({ held: ['alpha'], waiting_by_model: { beta: 2, alpha: 2 } });
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 200, 200]);
    expect(served()).toEqual(['alpha', 'alpha', 'alpha', 'beta', 'beta']);
    expect(fake!.gpu!.switches).toBe(2);
    expect((await queueOf()).model_switching).toMatchObject({ models_at_once: 1, held: ['beta'], switches: 2, switching_to: null });
    const metrics = await (await request(`${gw!.url}/internal/metrics`)).body.text();
    expect(metrics).toContain('gw_model_switches_total{family="localrunner",endpoint="gpu"} 2');
    expect(metrics).toContain('gw_model_held{family="localrunner",endpoint="gpu",model="beta"} 1');
    expect(metrics).toMatch(/gw_model_wait_longest_seconds\{family="localrunner",endpoint="gpu"\} [0-9.]+/);
  });

  it('in arrival order without model_switching: the engine loads a model on every change', async () => {
    await oneGpu(0, { max_concurrent_requests: 1 }, null);
    const { answers } = await interleaved();
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 200, 200]);
    expect(served()).toEqual(['alpha', 'beta', 'alpha', 'beta', 'alpha']);
    expect(fake!.gpu!.switches).toBe(5);
  });
});

describe('a switch is a cold load, not a failure', () => {
  it('a stream waits out the load under the cold first-token deadline, and a health check failing meanwhile leaves the endpoint in', async () => {
    // A switch takes 500 ms: beta's first token comes well past the warm deadline of 300 ms.
    await oneGpu(
      500,
      { first_token_timeout: '300ms', cold_first_token_timeout: '20s', check_interval: '100ms', check_timeout: '200ms' },
      { models_at_once: 1 },
      'pagedengine',
    );
    expect((await chat('alpha')).status).toBe(200);
    // The engine answers its health route 503 while it loads; the load lasts (the request for
    // beta held at the engine) until a failed check was seen to leave the endpoint warming.
    fake!.behaviour.healthStatus = 503;
    const hold = gate();
    fake!.behaviour.holdUntil = hold.promise;
    const beta = chat('beta', true);
    await waitFor(async () => (await endpointStatus()).status === 'warming', 'a failed check during the load');
    fake!.behaviour.holdUntil = null;
    hold.open();
    const answer = await beta;
    fake!.behaviour.healthStatus = 200;
    expect(answer.status).toBe(200);
    expect(answer.text).toContain('[DONE]');
    const ep = await endpointStatus();
    expect(ep.queue.model_switching).toMatchObject({ held: ['beta'], loading: null, switches: 2 });
    // Nothing counted against it: no failure, no failover, its breaker closed.
    expect(ep.circuit_breaker).toMatchObject({ state: 'closed', consecutive_failures: 0, health_failures: 0 });
    expect(ep.errors).toBe(0);
    expect(fake!.traffic.map((r) => r.json.model)).toEqual(['alpha', 'beta']);
  });
});
