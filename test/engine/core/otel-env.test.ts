// Tracing's settings: the config's `tracing`, with the standard OTEL_* variables read into it as
// every environment override is (the OpenTelemetry SDK configuration spec): they win over the
// file, an unusable value is a warning naming the variable, and tracing is off unless something
// turns it on.
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../../engine/core/config.js';
import { tracingSettings } from '../../../engine/backends/tracing.js';
import { writeConfig } from '../../helpers/gateway.js';

const load = (tracing: Record<string, unknown> = {}, env: NodeJS.ProcessEnv = {}) => loadConfig(writeConfig({ tracing }), env);
const settings = (tracing: Record<string, unknown> = {}, env: NodeJS.ProcessEnv = {}) => tracingSettings(load(tracing, env).config);

describe('tracing settings', () => {
  it('are off by default: null, so nothing of the SDK loads', () => {
    expect(settings()).toBeNull();
  });

  it("on in the config: the config's values, with the defaults", () => {
    expect(settings({ enabled: true, headers: { 'x-key': 'k' } })).toEqual({
      endpoint: 'http://localhost:4318/v1/traces',
      headers: { 'x-key': 'k' },
      serviceName: 'inference-gateway',
      sampleRatio: 1,
      captureContent: false,
      batchDelayMs: 1000,
    });
  });

  it('on through OTEL_* alone, which win over the config, and show in the loaded config', () => {
    const env = {
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318/',
      OTEL_EXPORTER_OTLP_HEADERS: 'authorization=Bearer%20abc, x-tenant=t1',
      OTEL_SERVICE_NAME: 'edge',
      OTEL_TRACES_SAMPLER_ARG: '0.25',
      OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT: 'true',
      OTEL_BSP_SCHEDULE_DELAY: '250',
    };
    expect(settings({ service_name: 'from-file', sample_ratio: 1 }, env)).toEqual({
      endpoint: 'http://collector:4318/v1/traces',
      headers: { authorization: 'Bearer abc', 'x-tenant': 't1' },
      serviceName: 'edge',
      sampleRatio: 0.25,
      captureContent: true,
      batchDelayMs: 250,
    });
    expect(load({}, env).config.tracing).toMatchObject({ enabled: true, service_name: 'edge' });
    expect(settings({}, { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://t:1/x' })?.endpoint).toBe('http://t:1/x');
    expect(settings({}, { OTEL_TRACES_EXPORTER: 'otlp' })?.endpoint).toBe('http://localhost:4318/v1/traces');
  });

  it('off again with OTEL_SDK_DISABLED or OTEL_TRACES_EXPORTER=none, whatever else says on', () => {
    expect(settings({ enabled: true }, { OTEL_SDK_DISABLED: 'true' })).toBeNull();
    expect(settings({ enabled: true }, { OTEL_TRACES_EXPORTER: 'none' })).toBeNull();
    expect(settings({}, { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_SDK_DISABLED: 'true' })).toBeNull();
  });

  it('an unusable value is a warning naming the variable, and the configured value stays', () => {
    const { config, problems } = load(
      { enabled: true, sample_ratio: 0.5 },
      { OTEL_TRACES_SAMPLER_ARG: '7', OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318', OTEL_BSP_SCHEDULE_DELAY: '1s' },
    );
    expect(config.tracing).toMatchObject({ sample_ratio: 0.5, endpoint: 'http://localhost:4318/v1/traces', batch_delay: '1s' });
    expect(problems.map((p) => [p.level, p.field])).toEqual([
      ['warn', 'OTEL_EXPORTER_OTLP_ENDPOINT'],
      ['warn', 'OTEL_TRACES_SAMPLER_ARG'],
      ['warn', 'OTEL_BSP_SCHEDULE_DELAY'],
    ]);
    // A value that may hold a key is never repeated.
    const headers = load({}, { OTEL_EXPORTER_OTLP_HEADERS: 'authorization' + '=Bearer s3cret,=nameless' }).problems;
    expect(headers).toEqual([expect.objectContaining({ level: 'warn', field: 'OTEL_EXPORTER_OTLP_HEADERS' })]);
    expect(JSON.stringify(headers)).not.toContain('s3cret');
  });
});

describe('the GenAI conventions switch', () => {
  it('OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental (in a list) switches metrics.gen_ai_conventions', () => {
    const file = writeConfig({});
    expect(loadConfig(file, {}).config.metrics.gen_ai_conventions).toBe('default');
    expect(loadConfig(file, { OTEL_SEMCONV_STABILITY_OPT_IN: 'http, gen_ai_latest_experimental' }).config.metrics.gen_ai_conventions).toBe(
      'latest_experimental',
    );
    expect(loadConfig(file, { OTEL_SEMCONV_STABILITY_OPT_IN: 'http' }).problems).toEqual([]);
  });
});
