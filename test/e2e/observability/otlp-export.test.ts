// Spans leave over OTLP/HTTP, as a collector (Jaeger, Tempo, an OpenTelemetry Collector) receives
// them: a receiver started here on loopback decodes what the gateway posts — the resource's
// service name, the request's SERVER span and its attempt's CLIENT span — and sees the headers
// the config gives (a collector's key). The standard OTEL_* variables win over the config.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { FakeBackend } from '../../../engine/demo/index.js';
import { closeAll, endpoint, startGateway } from '../../helpers/gateway.js';
import { freePort } from '../../helpers/llama-server.js';
import { OtlpSink } from '../../helpers/otlp-sink.js';
import { waitFor } from '../../helpers/wait.js';

let fake: FakeBackend;
const sink = new OtlpSink();
const base = () => sink.url.replace(/\/v1\/traces$/, '');

beforeAll(async () => {
  await sink.start();
  fake = await new FakeBackend({ family: 'cppengine', name: 'llama', models: [{ name: 'tiny-chat' }] }).start();
});
afterAll(async () => {
  await closeAll(null, [fake]);
  await sink.stop();
  expect(sink.errors).toEqual([]);
});

async function oneRequest(
  config: Record<string, any>,
  env: NodeJS.ProcessEnv = {},
  before: (logs: Record<string, any>[]) => Promise<unknown> = async () => {},
) {
  sink.reset();
  const gw = await startGateway({ ...config, discovery: { static: { endpoints: [endpoint('llama', 'llama.cpp', fake.url)] } } }, env);
  const status = (await (await request(`${gw.url}/internal/status`)).body.json()) as any;
  const res = await request(`${gw.url}/gw/llamacpp/v1/chat/completions`, {
    method: 'POST',
    body: JSON.stringify({ model: 'tiny-chat', messages: [{ role: 'user', content: 'hi' }] }),
  });
  await res.body.dump();
  await before(gw.logs);
  // Stopping the gateway exports what its batch still holds: no waiting on the batch's timer.
  await gw.close();
  return { status: res.statusCode, id: String(res.headers['x-gw-request-id']), logs: gw.logs, tracing: status.config.tracing };
}

describe('OTLP/HTTP export', () => {
  it('posts the request span and its attempt span, decoded by a receiver, with the service name and the configured headers', async () => {
    const r = await oneRequest({
      tracing: { enabled: true, endpoint: sink.url, headers: { authorization: 'Bearer collector-key' }, service_name: 'edge-gw' },
    });
    expect(r.status).toBe(200);
    expect(sink.exports.length).toBeGreaterThan(0);
    expect(sink.exports[0].path).toBe('/v1/traces');
    expect(sink.exports[0].headers['content-type']).toContain('application/json');
    expect(sink.exports[0].headers.authorization).toBe('Bearer collector-key');
    const all = sink.spans;
    const server = all.find((s) => s.attributes['gw.request_id'] === r.id)!;
    expect(server).toMatchObject({ name: 'POST /gw/llamacpp/*', kind: 2 });
    expect(server.resource).toMatchObject({ 'service.name': 'edge-gw', 'telemetry.sdk.language': 'nodejs' });
    expect(server.endNs).toBeGreaterThanOrEqual(server.startNs);
    // Times are Unix nanoseconds: within a minute of now.
    expect(Number(server.endNs / 1_000_000n)).toBeGreaterThan(Date.now() - 60_000);
    const client = all.find((s) => s.parentSpanId === server.spanId)!;
    expect(client).toMatchObject({ name: 'chat tiny-chat', kind: 3, traceId: server.traceId });
    expect(client.attributes).toMatchObject({ 'gen_ai.provider.name': 'llama.cpp', 'gen_ai.operation.name': 'chat', 'gw.endpoint': 'llama' });
    // The engine was sent the attempt's context.
    expect(fake.received.at(-1)!.headers.traceparent).toBe(`00-${client.traceId}-${client.spanId}-01`);
  });

  it('a collector that cannot be reached: the request is served, and the log says the spans were dropped, without the credentials', async () => {
    const closed = await freePort();
    const dropped = (logs: Record<string, any>[]) => logs.find((l) => String(l.msg).startsWith('tracing: spans could not be exported'));
    const r = await oneRequest({ tracing: { enabled: true, endpoint: `http://user:s3cret@127.0.0.1:${closed}/v1/traces` } }, {}, (logs) =>
      waitFor(() => dropped(logs), 'the warning that the spans were dropped'),
    );
    expect(r.status).toBe(200);
    const warning = dropped(r.logs);
    expect(warning).toMatchObject({ level: 40, endpoint: `http://127.0.0.1:${closed}/v1/traces` });
    // /internal/status says where spans go, without the credentials either.
    expect(r.tracing).toEqual({ exports_to: `http://127.0.0.1:${closed}/v1/traces`, sample_ratio: 1 });
    expect(JSON.stringify(r.logs)).not.toContain('s3cret');
  });

  it('turned on by OTEL_EXPORTER_OTLP_ENDPOINT alone, with OTEL_SERVICE_NAME; OTEL_SDK_DISABLED turns it off', async () => {
    const r = await oneRequest({}, { OTEL_EXPORTER_OTLP_ENDPOINT: base(), OTEL_SERVICE_NAME: 'from-env' });
    const server = sink.spans.find((s) => s.attributes['gw.request_id'] === r.id)!;
    expect(sink.exports[0].path).toBe('/v1/traces');
    expect(server.resource['service.name']).toBe('from-env');
    await oneRequest({ tracing: { enabled: true, endpoint: sink.url } }, { OTEL_SDK_DISABLED: 'true' });
    expect(sink.exports).toEqual([]);
  });
});
