// OpenTelemetry traces as a platform team reads them (exported over OTLP/HTTP to a receiver here): a
// SERVER span per request, a CLIENT span per upstream attempt under it, named and attributed by
// the GenAI conventions; retries, fallbacks and continuations as attempts of their own with the
// reason; a refused request as a span with error.type; the caller's traceparent continued and a
// new one sent to each engine; prompts on spans only with the content-capture switch.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { request } from 'undici';
import { keyHash } from '../../../engine/core/keys.js';
import { FakeBackend } from '../../../engine/demo/index.js';
import { closeAll, endpoint, startGateway, type Started } from '../../helpers/gateway.js';
import { OtlpSink, type SinkSpan } from '../../helpers/otlp-sink.js';
import { waitFor } from '../../helpers/wait.js';

const MODEL = 'Qwen2.5-7B';
const FALLBACK = 'Llama-3.1-8B';
const REPLY = 'The quick brown fox jumps over the lazy dog while the cat watches';
/** OTLP's span kinds. */
const SERVER = 2;
const CLIENT = 3;
/** Spans leave soon after they end: a test waits for them, not for the default second. */
const BATCH = '20ms';

let a: FakeBackend, b: FakeBackend, fb: FakeBackend, gw: Started;
const sink = new OtlpSink();
const fakes = () => [a, b, fb];

beforeAll(async () => {
  await sink.start();
  a = await new FakeBackend({ family: 'pagedengine', name: 'paged-a', models: [{ name: MODEL }], reply: REPLY }).start();
  b = await new FakeBackend({ family: 'pagedengine', name: 'paged-b', models: [{ name: MODEL }], reply: REPLY }).start();
  fb = await new FakeBackend({ family: 'pagedengine', name: 'paged-fallback', models: [{ name: FALLBACK }], reply: REPLY }).start();
  const ep = (f: FakeBackend, priority: number) => endpoint(f.name, 'pagedengine', f.url, { priority, check_interval: '60s' });
  gw = await startGateway({
    tracing: { enabled: true, endpoint: sink.url, batch_delay: BATCH },
    proxy: { load_balancer: 'priority', max_retries: 5, circuit_breaker: { proxy_failures: 1000 }, affinity: { enabled: false } },
    // The messages API translated to chat completions, though vLLM serves it natively too.
    translators: { msgapi: { passthrough: false } },
    model_fallbacks: { [MODEL]: [FALLBACK] },
    discovery: { static: { endpoints: [ep(a, 100), ep(b, 50), ep(fb, 10)] } },
  });
});
afterAll(async () => {
  await closeAll(gw, fakes());
  await sink.stop();
  expect(sink.errors).toEqual([]);
});
beforeEach(() => {
  fakes().forEach((f) => f.reset());
  sink.reset();
});

/** The request's SERVER span (found by its request id, once it ended) and its CLIENT spans in order. */
async function traceOf(requestId: string): Promise<{ server: SinkSpan; clients: SinkSpan[] }> {
  const server = await waitFor(() => sink.spans.find((s) => s.attributes['gw.request_id'] === requestId), `the server span of ${requestId}`);
  const { traceId, spanId } = server;
  const clients = sink.spans
    .filter((s) => s.traceId === traceId && s.kind === CLIENT)
    .sort((x, y) => (x.attributes['gw.attempt'] as number) - (y.attributes['gw.attempt'] as number));
  for (const c of clients) expect(c.parentSpanId).toBe(spanId);
  return { server, clients };
}

const chat = async (body: Record<string, unknown>, headers: Record<string, string> = {}, path = '/gw/pagedengine/v1/chat/completions') => {
  const res = await request(`${gw.url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'hello there' }], ...body }),
  });
  const text = await res.body.text();
  return { status: res.statusCode, id: String(res.headers['x-gw-request-id']), text };
};
const traceparentOf = (f: FakeBackend) => f.received.filter((r) => r.url.endsWith('/completions')).map((r) => r.headers.traceparent as string);

describe('a plain request', () => {
  it('is a SERVER span with one CLIENT span under it, by the GenAI conventions, and the engine gets the attempt as its parent', async () => {
    const r = await chat({ max_tokens: 20 });
    expect(r.status).toBe(200);
    const { server, clients } = await traceOf(r.id);
    expect(server.kind).toBe(SERVER);
    expect(server.name).toBe('POST /gw/pagedengine/*');
    expect(server.attributes).toMatchObject({
      'http.request.method': 'POST',
      'http.response.status_code': 200,
      'url.path': '/gw/pagedengine/v1/chat/completions',
      'gen_ai.request.model': MODEL,
      'gw.attempts': 1,
      'gw.endpoint': 'paged-a',
      'gw.routing.decision': 'routed',
    });
    expect(clients).toHaveLength(1);
    const [attempt] = clients;
    expect(attempt.name).toBe(`chat ${MODEL}`);
    expect(attempt.attributes).toMatchObject({
      'gen_ai.operation.name': 'chat',
      'gen_ai.provider.name': 'vllm',
      'gen_ai.request.model': MODEL,
      'server.address': '127.0.0.1',
      'server.port': Number(new URL(a.url).port),
      'gw.endpoint': 'paged-a',
      'http.response.status_code': 200,
    });
    expect(attempt.attributes['gen_ai.usage.output_tokens']).toBeGreaterThan(0);
    expect(attempt.attributes['gen_ai.usage.input_tokens']).toBeGreaterThan(0);
    expect(attempt.attributes['gen_ai.input.messages']).toBeUndefined();
    expect(attempt.attributes['gen_ai.response.finish_reasons']).toEqual(['stop']);
    // Tokens and finish reasons are the attempt's; the request's span does not repeat them.
    expect(server.attributes['gen_ai.usage.output_tokens']).toBeUndefined();
    expect(server.attributes['gw.routing.strategy']).toBeUndefined();
    // The engine continues the attempt's trace: same trace, the CLIENT span as parent.
    const { traceId, spanId } = attempt;
    expect(traceparentOf(a)).toEqual([`00-${traceId}-${spanId}-01`]);
    // The access log line carries the trace id.
    const line = await waitFor(() => gw.logs.find((l) => l.msg === 'request' && l.req === r.id), 'the access log line');
    expect(line.trace_id).toBe(traceId);
  });

  it("continues the caller's traceparent, and sends the engine its own attempt's instead", async () => {
    const callerTrace = '4bf92f3577b34da6a3ce929d0e0e4736';
    const callerSpan = '00f067aa0ba902b7';
    const r = await chat({}, { traceparent: `00-${callerTrace}-${callerSpan}-01`, tracestate: 'vendor=1' });
    const { server, clients } = await traceOf(r.id);
    expect(server.traceId).toBe(callerTrace);
    expect(server.parentSpanId).toBe(callerSpan);
    expect(server.traceState).toBe('vendor=1');
    const sent = traceparentOf(a);
    expect(sent).toEqual([`00-${callerTrace}-${clients[0].spanId}-01`]);
    expect(a.received.at(-1)!.headers.tracestate).toBe('vendor=1');
  });
});

describe('a trace the caller did not sample', () => {
  it('records nothing, counts nothing for it, and still sends the engine its context, not sampled', async () => {
    const callerTrace = '0af7651916cd43dd8448eb211c80319c';
    const r = await chat({}, { traceparent: `00-${callerTrace}-b7ad6b7169203331-00` });
    expect(r.status).toBe(200);
    const line = await waitFor(() => gw.logs.find((l) => l.msg === 'request' && l.req === r.id), 'the access log line');
    expect(line.trace_id).toBeUndefined();
    expect(sink.spans.filter((s) => s.traceId === callerTrace)).toEqual([]);
    expect(traceparentOf(a)).toEqual([expect.stringMatching(new RegExp(`^00-${callerTrace}-[0-9a-f]{16}-00$`))]);
  });
});

describe('a stream', () => {
  it('has its time to first chunk and its tokens on the attempt span', async () => {
    const client = new OpenAI({ baseURL: `${gw.url}/gw/pagedengine/v1`, apiKey: 'unused', maxRetries: 0 });
    const stream = await client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'hi' }], stream: true }).withResponse();
    let text = '';
    for await (const c of stream.data) text += c.choices[0]?.delta?.content ?? '';
    expect(text).toBe(REPLY);
    const { clients } = await traceOf(String(stream.response.headers.get('x-gw-request-id')));
    expect(clients).toHaveLength(1);
    expect(clients[0].attributes['gw.time_to_first_chunk_ms']).toBeGreaterThanOrEqual(0);
    expect(clients[0].attributes['gen_ai.usage.output_tokens']).toBeGreaterThan(0);
    expect(clients[0].attributes['gen_ai.response.finish_reasons']).toEqual(['stop']);
  });

  it('a stream cut by its token limit says length', async () => {
    a.behaviour.finishReason = 'length';
    const client = new OpenAI({ baseURL: `${gw.url}/gw/pagedengine/v1`, apiKey: 'unused', maxRetries: 0 });
    const stream = await client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'hi' }], stream: true }).withResponse();
    for await (const _ of stream.data);
    const { clients } = await traceOf(String(stream.response.headers.get('x-gw-request-id')));
    expect(clients[0].attributes['gen_ai.response.finish_reasons']).toEqual(['length']);
  });
});

describe('attempts after the first', () => {
  it('a retry after a 500: the failed attempt with its error, then the one that answered, reason retry', async () => {
    a.behaviour.status = 500;
    const r = await chat({});
    expect(r.status).toBe(200);
    const { server, clients } = await traceOf(r.id);
    expect(clients.map((c) => [c.attributes['gw.endpoint'], c.attributes['error.type'], c.attributes['gw.attempt.reason']])).toEqual([
      ['paged-a', '500', undefined],
      ['paged-b', undefined, 'retry'],
    ]);
    expect(clients[0].status.code).toBe(2);
    expect(clients[0].endNs).toBeGreaterThanOrEqual(clients[0].startNs);
    expect(clients[1].startNs).toBeGreaterThanOrEqual(clients[0].endNs);
    expect(server.attributes['gw.attempts']).toBe(2);
    // Each attempt sent its own span as the engine's parent.
    expect(traceparentOf(a)[0]).toContain(clients[0].spanId);
    expect(traceparentOf(b)[0]).toContain(clients[1].spanId);
  });

  it('a fallback model: its attempt names the model and says fallback', async () => {
    a.behaviour.status = 500;
    b.behaviour.status = 500;
    const r = await chat({});
    expect(r.status).toBe(200);
    const { server, clients } = await traceOf(r.id);
    const last = clients.at(-1)!;
    expect(last.name).toBe(`chat ${FALLBACK}`);
    expect(last.attributes).toMatchObject({ 'gen_ai.request.model': FALLBACK, 'gw.attempt.reason': 'fallback', 'gw.endpoint': 'paged-fallback' });
    expect(server.attributes['gw.routing.decision']).toBe('fallback');
  });

  it('a continuation after a mid-stream break: the broken attempt, then the one that finished the answer', async () => {
    a.behaviour.resetAfterChunks = 6;
    const client = new OpenAI({ baseURL: `${gw.url}/gw/pagedengine/v1`, apiKey: 'unused', maxRetries: 0 });
    const stream = await client.chat.completions
      .create({ model: MODEL, messages: [{ role: 'user', content: 'hi' }], stream: true, max_tokens: 100 })
      .withResponse();
    let text = '';
    for await (const c of stream.data) text += c.choices[0]?.delta?.content ?? '';
    expect(text).toBe(REPLY);
    const { clients } = await traceOf(String(stream.response.headers.get('x-gw-request-id')));
    expect(clients.map((c) => c.attributes['gw.attempt.reason'])).toEqual([undefined, 'continuation']);
    expect(String(clients[0].attributes['error.type'])).toMatch(/^stream_broken/);
    expect(clients[1].attributes['gw.continuation']).toBe('continued');
  });
});

describe('a translated messages-API request', () => {
  it('is one SERVER span on /gw/msgapi and an attempt sent as chat completions', async () => {
    const client = new Anthropic({ baseURL: `${gw.url}/gw/msgapi`, apiKey: 'unused', maxRetries: 0 });
    const { response } = await client.messages.create({ model: MODEL, max_tokens: 20, messages: [{ role: 'user', content: 'hi' }] }).withResponse();
    const { server, clients } = await traceOf(String(response.headers.get('x-gw-request-id')));
    expect(server.name).toBe('POST /gw/msgapi/v1/messages');
    expect(clients).toHaveLength(1);
    expect(clients[0].attributes).toMatchObject({ 'gen_ai.operation.name': 'chat', 'url.path': '/v1/chat/completions', 'gen_ai.provider.name': 'vllm' });
  });
});

describe('with content capture', () => {
  let captured: Started;
  const spans = new OtlpSink();
  beforeAll(async () => {
    await spans.start();
    captured = await startGateway(
      { discovery: { static: { endpoints: [endpoint('paged-a', 'pagedengine', a.url)] } } },
      {
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: spans.url,
        OTEL_BSP_SCHEDULE_DELAY: '20',
        OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT: 'true',
      },
    );
  });
  afterAll(async () => {
    await captured.close();
    await spans.stop();
  });

  it('on through the standard OTEL_* variables: the prompt is on the attempt span', async () => {
    const res = await request(`${captured.url}/gw/pagedengine/v1/chat/completions`, {
      method: 'POST',
      body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'a private prompt' }] }),
    });
    await res.body.dump();
    const attempt = await waitFor(() => spans.spans.find((s) => s.kind === CLIENT), 'the attempt span');
    expect(JSON.parse(String(attempt.attributes['gen_ai.input.messages']))).toEqual([{ role: 'user', content: 'a private prompt' }]);
  });
});

describe('a refused request', () => {
  let keyed: Started;
  const spans = new OtlpSink();
  beforeAll(async () => {
    await spans.start();
    keyed = await startGateway({
      tracing: { enabled: true, endpoint: spans.url, batch_delay: BATCH },
      auth: { keys: [{ name: 'team-a', hash: keyHash('sk-team-a'), models: ['some-other-model'] }] },
      discovery: { static: { endpoints: [endpoint('paged-a', 'pagedengine', a.url)] } },
    });
  });
  afterAll(async () => {
    await keyed.close();
    await spans.stop();
  });

  it('is a SERVER span with error.type and the key, and no attempt', async () => {
    const res = await request(`${keyed.url}/gw/pagedengine/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: 'Bearer sk-team-a' },
      body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'hi' }] }),
    });
    await res.body.dump();
    expect(res.statusCode).toBe(403);
    const server = await waitFor(() => spans.spans.find((s) => s.kind === SERVER), 'the server span');
    expect(server.attributes).toMatchObject({ 'error.type': 'MODEL_NOT_ALLOWED', 'gw.key': 'team-a', 'http.response.status_code': 403 });
    expect(server.status.code).toBe(2);
    expect(spans.spans.filter((s) => s.kind === CLIENT)).toEqual([]);
    expect(a.received.filter((r) => r.url.endsWith('/completions'))).toEqual([]);
  });
});

describe('tracing off (the default)', () => {
  let plain: Started;
  beforeAll(async () => {
    plain = await startGateway({ discovery: { static: { endpoints: [endpoint('paged-a', 'pagedengine', a.url)] } } });
  });
  afterAll(() => plain.close());

  it("makes no span, passes the caller's traceparent through untouched, and logs no trace id", async () => {
    expect(plain.gw.runtime.tracer).toBeNull();
    const traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
    const res = await request(`${plain.url}/gw/pagedengine/v1/chat/completions`, {
      method: 'POST',
      headers: { traceparent },
      body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'hi' }] }),
    });
    await res.body.dump();
    expect(traceparentOf(a)).toEqual([traceparent]);
    const id = String(res.headers['x-gw-request-id']);
    const line = await waitFor(() => plain.logs.find((l) => l.msg === 'request' && l.req === id), 'the access log line');
    expect(line.trace_id).toBeUndefined();
  });
});
