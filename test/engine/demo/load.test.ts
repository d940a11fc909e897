// The fakes' engine load reports: llama.cpp's /slots and /metrics, vLLM's and SGLang's /metrics
// count the generation requests a fake serves now and the load other clients are said to put on
// it, in the shapes of the real replies recorded in test/fixtures/engine-load/.
import { readFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { FakeBackend } from '../../../engine/demo/index.js';
import { sample } from '../../helpers/prom.js';
import { waitFor } from '../../helpers/wait.js';

const fixture = (name: string) => readFileSync(new URL(`../../fixtures/engine-load/${name}`, import.meta.url), 'utf8');
const helpLines = (text: string) => text.split('\n').filter((l) => l.startsWith('# '));
const get = async (fake: FakeBackend, path: string) => {
  const res = await request(`${fake.url}${path}`);
  return { status: res.statusCode, type: res.headers['content-type'], text: await res.body.text() };
};

let fake: FakeBackend;
let release: () => void = () => {};
afterEach(async () => {
  release();
  await fake.stop();
});

/** Start `n` streamed chats the fake holds before their head; resolves once it serves them all. */
async function hold(n: number): Promise<Promise<unknown>[]> {
  fake.behaviour.holdUntil = new Promise<void>((r) => (release = r));
  const body = JSON.stringify({ model: 'test-model', stream: true, messages: [{ role: 'user', content: 'hi' }] });
  const replies = Array.from({ length: n }, () =>
    request(`${fake.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body }).then((r) => r.body.text()),
  );
  await waitFor(() => fake.inFlight === n, `${n} requests in flight`);
  return replies;
}

describe('cppengine (llama.cpp)', () => {
  it('lists its slots, the first ones processing, and defers the requests beyond them', async () => {
    fake = await new FakeBackend({ family: 'cppengine', slots: 2, models: [{ name: 'test-model', servingContext: 2048 }] }).start();
    const idle = JSON.parse((await get(fake, '/slots')).text);
    expect(idle).toEqual(JSON.parse(fixture('llamacpp-slots-idle.json')).map((s: object) => ({ ...s, n_ctx: 2048 })));

    const replies = await hold(3);
    const slots = JSON.parse((await get(fake, '/slots')).text);
    const recorded = JSON.parse(fixture('llamacpp-slots-deferred.json'));
    expect(slots.map((s: object) => Object.keys(s))).toEqual(recorded.map((s: object) => Object.keys(s)));
    expect(slots.map((s: { is_processing: boolean }) => s.is_processing)).toEqual([true, true]);
    expect(Object.keys(slots[0].params)).toEqual(Object.keys(recorded[0].params));
    const metrics = await get(fake, '/metrics');
    expect(helpLines(metrics.text)).toEqual(helpLines(fixture('llamacpp-metrics-deferred.txt')));
    expect([sample(metrics.text, 'llamacpp:requests_processing'), sample(metrics.text, 'llamacpp:requests_deferred')]).toEqual([2, 1]);
    expect((await get(fake, '/slots?fail_on_no_slot=1')).status).toBe(503);

    release();
    await Promise.all(replies);
    await waitFor(() => fake.inFlight === 0, 'the held requests to finish');
    const after = await get(fake, '/metrics');
    expect([sample(after.text, 'llamacpp:requests_processing'), sample(after.text, 'llamacpp:requests_deferred')]).toEqual([0, 0]);
    expect(sample(after.text, 'llamacpp:prompt_tokens_total')).toBe(fake.tokens.evaluated);
  });

  it('adds the load of other clients, past its slots deferred', async () => {
    fake = await new FakeBackend({ family: 'cppengine' }).start();
    fake.behaviour.otherLoad = { running: 1, waiting: 2 };
    const replies = await hold(2);
    const text = (await get(fake, '/metrics')).text;
    expect([sample(text, 'llamacpp:requests_processing'), sample(text, 'llamacpp:requests_deferred')]).toEqual([2, 3]);
    expect(JSON.parse((await get(fake, '/slots')).text).filter((s: { is_processing: boolean }) => s.is_processing)).toHaveLength(2);
    release();
    await Promise.all(replies);
  });

  it('answers its load routes whatever the failure behaviours, and without counting them in flight', async () => {
    fake = await new FakeBackend({ family: 'cppengine' }).start();
    fake.behaviour = { ...fake.behaviour, hang: true, status: 500, resetOnRequest: true, otherLoad: { running: 1, waiting: 0 } };
    expect(sample((await get(fake, '/metrics')).text, 'llamacpp:requests_processing')).toBe(1);
    expect((await get(fake, '/slots')).status).toBe(200);
    expect(fake.inFlight).toBe(0);
  });
});

describe('pagedengine (vLLM)', () => {
  it('reports running and waiting requests in /metrics, labelled by engine and model, and in /health', async () => {
    fake = await new FakeBackend({ family: 'pagedengine', models: [{ name: 'Qwen/Qwen2.5-7B-Instruct' }] }).start();
    fake.behaviour.otherLoad = { running: 1, waiting: 2 };
    const replies = await hold(2);
    const metrics = await get(fake, '/metrics');
    expect(helpLines(metrics.text)).toEqual(helpLines(fixture('vllm-metrics.txt')));
    const labels = { engine: '0', model_name: 'Qwen/Qwen2.5-7B-Instruct' };
    expect([sample(metrics.text, 'vllm:num_requests_running', labels), sample(metrics.text, 'vllm:num_requests_waiting', labels)]).toEqual([3, 2]);
    expect(metrics.text).toContain('vllm:num_requests_running{engine="0",model_name="Qwen/Qwen2.5-7B-Instruct"} 3.0\n');
    expect(JSON.parse((await get(fake, '/health')).text)).toMatchObject({ num_requests_running: 3, num_requests_waiting: 2 });
    release();
    await Promise.all(replies);
  });
});

describe('radixengine (SGLang)', () => {
  it('reports running and queued requests in /metrics', async () => {
    fake = await new FakeBackend({ family: 'radixengine', models: [{ name: 'Qwen/Qwen2.5-7B-Instruct' }] }).start();
    fake.behaviour.otherLoad = { running: 3, waiting: 1 };
    const replies = await hold(1);
    const metrics = await get(fake, '/metrics');
    expect(helpLines(metrics.text)).toEqual(helpLines(fixture('sglang-metrics.txt')));
    expect([sample(metrics.text, 'sglang:num_running_reqs'), sample(metrics.text, 'sglang:num_queue_reqs')]).toEqual([4, 1]);
    expect(JSON.parse((await get(fake, '/health')).text)).toMatchObject({ num_requests_running: 4, num_requests_waiting: 1 });
    release();
    await Promise.all(replies);
  });
});
