// /internal/metrics: the Prometheus text passes promtool, and its series move with real traffic
// through the gateway (durations per family and route, a failover, a breaker opening, stream
// timings and tokens, refused paths, real 429s of the rate limits).
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { FakeBackend } from '../../../engine/demo/index.js';
import { closeAll, endpoint, NO_RATE_LIMITS, startGateway, type Started } from '../../helpers/gateway.js';
import { rawRequest } from '../../helpers/http.js';
import { waitFor } from '../../helpers/wait.js';
import { sample } from '../../helpers/prom.js';

const PROMTOOL = '/usr/bin/promtool';
const havePromtool = existsSync(PROMTOOL);
if (!havePromtool && process.env.GW_REQUIRE_PROMTOOL === '1') throw new Error(`GW_REQUIRE_PROMTOOL=1 but ${PROMTOOL} is missing (apt-get install prometheus)`);

let gw: Started | null = null;
let fakes: FakeBackend[] = [];
afterEach(async () => {
  await closeAll(gw, fakes);
  [gw, fakes] = [null, []];
});

async function setup(family: string, n: number, extra: Record<string, unknown> = {}, perEndpoint: Record<string, unknown> = {}) {
  fakes = await Promise.all(Array.from({ length: n }, (_, i) => new FakeBackend({ family, name: `f${i}`, models: [{ name: 'test-model' }] }).start()));
  gw = await startGateway({
    ...extra,
    discovery: { static: { endpoints: fakes.map((f, i) => endpoint(f.name, family, f.url, { priority: 100 - i, check_interval: '60s', ...perEndpoint })) } },
  });
  return gw;
}

async function scrape(g: Started): Promise<{ text: string; contentType: string }> {
  const res = await request(`${g.url}/internal/metrics`);
  expect(res.statusCode).toBe(200);
  return { text: await res.body.text(), contentType: String(res.headers['content-type']) };
}

const chat = (g: Started, family: string, stream = false) =>
  request(`${g.url}/gw/${family}/v1/chat/completions`, {
    method: 'POST',
    body: JSON.stringify({ model: 'test-model', messages: [{ role: 'user', content: 'hi' }], stream }),
  });

describe('/internal/metrics', () => {
  it.skipIf(!havePromtool)('passes promtool check metrics after mixed traffic (skipped: /usr/bin/promtool absent; apt-get install prometheus)', async () => {
    const g = await setup('pagedengine', 2);
    await (await chat(g, 'pagedengine')).body.dump();
    await (await chat(g, 'pagedengine', true)).body.dump();
    await (await request(`${g.url}/gw/pagedengine/v1/nowhere`)).body.dump();
    await (await request(`${g.url}/internal/status`)).body.dump();
    const { text, contentType } = await scrape(g);
    expect(contentType).toBe('text/plain; version=0.0.4; charset=utf-8');
    const check = spawnSync(PROMTOOL, ['check', 'metrics'], { input: text, encoding: 'utf8' });
    expect(check.stdout + check.stderr).toBe('');
    expect(check.status).toBe(0);
  });

  it('times each request by family, route, endpoint and status class, with the gateway overhead and Node process metrics', async () => {
    const g = await setup('pagedengine', 1);
    const before = (await scrape(g)).text;
    const labels = { family: 'pagedengine', route: 'proxy', endpoint: 'f0', status: '2xx' };
    expect(sample(before, 'gw_request_duration_seconds_count', labels)).toBeUndefined();
    await (await chat(g, 'pagedengine')).body.dump();
    const { text } = await scrape(g);
    expect(sample(text, 'gw_request_duration_seconds_count', labels)).toBe(1);
    expect(sample(text, 'gw_request_duration_seconds_bucket', { ...labels, le: '+Inf' })).toBe(1);
    expect(sample(text, 'gw_overhead_seconds_count', { family: 'pagedengine', route: 'proxy' })).toBe(1);
    // The overhead excludes the upstream attempt: below the whole duration.
    expect(sample(text, 'gw_overhead_seconds_sum', { family: 'pagedengine', route: 'proxy' })!).toBeLessThan(
      sample(text, 'gw_request_duration_seconds_sum', labels)!,
    );
    // The first scrape itself is timed on its route.
    expect(sample(text, 'gw_request_duration_seconds_count', { family: 'none', route: 'internal-metrics', endpoint: 'none', status: '2xx' })).toBe(1);
    expect(sample(text, 'gw_endpoint_requests_total', { endpoint: 'f0' })).toBe(1);
    expect(sample(text, 'gw_model_requests_total', { model: 'test-model' })).toBe(1);
    // Present; its value grows in the kernel's accounting ticks, so between two scrapes on a busy
    // machine it may not have moved yet.
    expect(sample(text, 'process_cpu_user_seconds_total')).toBeGreaterThanOrEqual(0);
    expect(sample(text, 'nodejs_active_handles')).toBeGreaterThan(0);
    expect(sample(text, 'gw_system_status', { status: 'healthy' })).toBe(1);
    expect(sample(text, 'gw_routing_decisions_total', { family: 'pagedengine', decision: 'routed' })).toBe(1);
  });

  it('shows a breaker opening: five 5xx replies move the state from closed to open', async () => {
    const g = await setup('pagedengine', 2, { proxy: { circuit_breaker: { initial_open_timeout: '30s' }, retry: { on_statuses: [] } } });
    const start = (await scrape(g)).text;
    expect(sample(start, 'gw_endpoint_breaker_state', { endpoint: 'f0', state: 'closed' })).toBe(1);
    expect(sample(start, 'gw_endpoint_breaker_state', { endpoint: 'f0', state: 'open' })).toBe(0);
    fakes[0].behaviour.status = 500;
    for (let i = 0; i < 5; i++) await (await chat(g, 'pagedengine')).body.dump();
    const { text } = await scrape(g);
    expect(sample(text, 'gw_endpoint_breaker_state', { endpoint: 'f0', state: 'open' })).toBe(1);
    expect(sample(text, 'gw_endpoint_breaker_state', { endpoint: 'f0', state: 'closed' })).toBe(0);
    expect(sample(text, 'gw_request_duration_seconds_count', { route: 'proxy', endpoint: 'f0', status: '5xx' })).toBe(5);
    expect(sample(text, 'gw_endpoint_errors_total', { endpoint: 'f0' })).toBe(5);
  });

  it('counts a failover: the first endpoint refuses the connection, the second answers', async () => {
    const g = await setup('pagedengine', 2);
    expect(sample((await scrape(g)).text, 'gw_failovers_total', { family: 'pagedengine', route: 'proxy' })).toBe(0);
    await fakes[0].stop();
    const res = await chat(g, 'pagedengine');
    await res.body.dump();
    expect(res.statusCode).toBe(200);
    expect(res.headers['x-gw-endpoint']).toBe('f1');
    const { text } = await scrape(g);
    expect(sample(text, 'gw_failovers_total', { family: 'pagedengine', route: 'proxy' })).toBe(1);
    expect(sample(text, 'gw_endpoint_up', { endpoint: 'f0' })).toBe(0);
  });

  it('counts a real 429 of the per-IP limit', async () => {
    const g = await setup('hosted-compatible', 1, { server: { rate_limits: { ...NO_RATE_LIMITS, per_ip_requests_per_minute: 1, burst_size: 1 } } });
    await (await chat(g, 'hosted-compatible')).body.dump();
    const limited = await chat(g, 'hosted-compatible');
    await limited.body.dump();
    expect(limited.statusCode).toBe(429);
    expect(sample((await scrape(g)).text, 'gw_rate_limited_total', { scope: 'ip' })).toBe(1);
  });

  it("counts a 429 of an endpoint's own requests-per-minute limit", async () => {
    const g = await setup('hosted-compatible', 1, { server: { rate_limits: { ...NO_RATE_LIMITS, burst_size: 1 } } }, { requests_per_minute: 1 });
    await (await chat(g, 'hosted-compatible')).body.dump();
    const limited = await chat(g, 'hosted-compatible');
    await limited.body.dump();
    expect(limited.statusCode).toBe(429);
    expect(sample((await scrape(g)).text, 'gw_rate_limited_total', { scope: 'endpoint' })).toBe(1);
  });

  it('serves the rate-limit series at 0 per scope and counts refused paths', async () => {
    const g = await setup('pagedengine', 1);
    for (const scope of ['global', 'ip', 'health', 'internal', 'endpoint']) expect(sample((await scrape(g)).text, 'gw_rate_limited_total', { scope })).toBe(0);
    expect((await rawRequest(`${g.url}/gw/pagedengine/v1/../secret`)).status).toBe(400);
    expect((await rawRequest(`${g.url}/nowhere`)).status).toBe(404);
    await (await request(`${g.url}/gw/pagedengine/v1/not-in-allowlist`)).body.dump();
    const { text } = await scrape(g);
    expect(sample(text, 'gw_refused_requests_total', { reason: 'unsafe_path' })).toBe(1);
    expect(sample(text, 'gw_refused_requests_total', { reason: 'route_not_found' })).toBe(1);
    expect(sample(text, 'gw_errors_total', { route: 'proxy', code: 'PATH_NOT_ALLOWED' })).toBe(1);
  });

  it('times the first token of a stream, and counts it as an active stream while it lasts', async () => {
    const g = await setup('pagedengine', 1);
    let release!: () => void;
    fakes[0].behaviour.beforeChunk = (i) => (i === 2 ? new Promise<void>((r) => (release = r)) : Promise.resolve());
    const res = await chat(g, 'pagedengine', true);
    expect(res.statusCode).toBe(200);
    // The head, the role chunk and the first content are out; the next chunk waits: the stream is active.
    const during = (await scrape(g)).text;
    expect(sample(during, 'gw_active_streams', { endpoint: 'f0' })).toBe(1);
    release();
    await res.body.dump();
    const { text } = await scrape(g);
    expect(sample(text, 'gw_active_streams', { endpoint: 'f0' })).toBe(0);
    // The GenAI series: the conventions' attributes, and the gateway's endpoint.
    const labels = { gen_ai_operation_name: 'chat', gen_ai_provider_name: 'vllm', gen_ai_request_model: 'test-model', endpoint: 'f0' };
    expect(sample(text, 'gen_ai_server_time_to_first_token_seconds_count', labels)).toBe(1);
    expect(sample(text, 'gen_ai_server_request_duration_seconds_count', { ...labels, error_type: '' })).toBe(1);
    // A piped stream is never parsed for usage: no tokens, no time per output token.
    expect(sample(text, 'gen_ai_server_time_per_output_token_seconds_count', labels)).toBeUndefined();
    expect(sample(text, 'gw_tokens_total', { family: 'pagedengine' })).toBeUndefined();
  });

  it('counts tokens and time per output token from a translated messages-API stream, and the translator counters', async () => {
    const g = await setup('hosted-compatible', 1);
    const res = await request(`${g.url}/gw/msgapi/v1/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'test-model', max_tokens: 64, stream: true, messages: [{ role: 'user', content: 'Hello there, how are you?' }] }),
    });
    expect(res.statusCode).toBe(200);
    const events = await res.body.text();
    const reported = JSON.parse(/event: message_delta\ndata: (.*)\n/.exec(events)![1]).usage;
    const { text } = await scrape(g);
    const labels = { family: 'hosted-compatible', model: 'test-model' };
    expect(sample(text, 'gw_tokens_total', { ...labels, type: 'output' })).toBe(reported.output_tokens);
    expect(sample(text, 'gw_tokens_total', { ...labels, type: 'input' })).toBe(reported.input_tokens);
    const genai = { endpoint: 'f0', gen_ai_request_model: 'test-model', gen_ai_provider_name: 'openai' };
    expect(sample(text, 'gen_ai_server_time_to_first_token_seconds_count', genai)).toBe(1);
    expect(sample(text, 'gen_ai_server_time_per_output_token_seconds_count', genai)).toBe(1);
    expect(sample(text, 'gen_ai_client_token_usage_sum', { ...genai, gen_ai_token_type: 'output' })).toBe(reported.output_tokens);
    expect(sample(text, 'gen_ai_client_token_usage_sum', { ...genai, gen_ai_token_type: 'input' })).toBe(reported.input_tokens);
    expect(sample(text, 'gw_translator_requests_total', { translator: 'msgapi', mode: 'translation' })).toBe(1);
    expect(sample(text, 'gw_translator_streaming_requests_total', { translator: 'msgapi' })).toBe(1);
  });

  it('metrics.gen_ai_conventions: latest_experimental gives the announced token series instead of gen_ai.client.token.usage', async () => {
    const g = await setup('hosted-compatible', 1, { metrics: { gen_ai_conventions: 'latest_experimental' } });
    const res = await request(`${g.url}/gw/msgapi/v1/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'test-model', max_tokens: 64, messages: [{ role: 'user', content: 'Hello there, how are you?' }] }),
    });
    const reported = ((await res.body.json()) as any).usage;
    const { text } = await scrape(g);
    const genai = { endpoint: 'f0', gen_ai_request_model: 'test-model' };
    expect(sample(text, 'gen_ai_client_inference_operation_output_tokens_sum', genai)).toBe(reported.output_tokens);
    expect(sample(text, 'gen_ai_client_inference_operation_input_tokens_sum', genai)).toBe(reported.input_tokens);
    expect(text).not.toContain('gen_ai_client_token_usage');
  });

  it('times a wait for a concurrency slot, and shows the waiter while it waits', async () => {
    const g = await setup('pagedengine', 1, {}, { max_concurrent_requests: 1 });
    let release!: () => void;
    fakes[0].behaviour.holdUntil = new Promise<void>((r) => (release = r));
    const first = chat(g, 'pagedengine');
    await waitFor(() => fakes[0].traffic.some((t) => t.url.includes('chat')), 'the first request at the backend');
    const second = chat(g, 'pagedengine');
    await waitFor(
      async () => sample((await scrape(g)).text, 'gw_queue_waiting', { endpoint: 'f0' }) === 1 || undefined,
      'the second request waiting for the slot',
    );
    release();
    for (const res of await Promise.all([first, second])) {
      expect(res.statusCode).toBe(200);
      await res.body.dump();
    }
    const { text } = await scrape(g);
    expect(sample(text, 'gw_queue_wait_seconds_count', { family: 'pagedengine', route: 'proxy' })).toBe(1);
    expect(sample(text, 'gw_queue_waiting', { endpoint: 'f0' })).toBe(0);
    expect(sample(text, 'gw_queue_slots_held', { endpoint: 'f0' })).toBe(0);
  });

  it('answers 503 METRICS_DISABLED naming the fix when metrics.enabled is false', async () => {
    const g = await setup('pagedengine', 1, { metrics: { enabled: false } });
    const res = await request(`${g.url}/internal/metrics`);
    const body = (await res.body.json()) as any;
    expect(res.statusCode).toBe(503);
    // Nothing is timed either: the metrics step took no taps.
    expect(g.gw.runtime.metrics.registry.getMetricsAsArray()).toHaveLength(0);
    expect(body.error.code).toBe('METRICS_DISABLED');
    expect(body.error.message).toContain('metrics.enabled: true');
  });
});
