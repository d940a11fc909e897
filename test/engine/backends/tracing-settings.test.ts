// Tracing's settings: the config's `tracing`, with the standard OTEL_* variables winning (the
// OpenTelemetry SDK configuration spec), and off unless something turns it on.
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../../engine/core/config.js';
import { tracingSettings } from '../../../engine/backends/tracing.js';
import { writeConfig } from '../../helpers/gateway.js';

const configWith = (tracing: Record<string, unknown> = {}) => loadConfig(writeConfig({ tracing }), {}).config;

describe('tracingSettings', () => {
  it('is off by default: null, so nothing of the SDK loads', () => {
    expect(tracingSettings(configWith(), {})).toBeNull();
  });

  it("on in the config: the config's values, with the defaults", () => {
    expect(tracingSettings(configWith({ enabled: true, headers: { 'x-key': 'k' } }), {})).toEqual({
      endpoint: 'http://localhost:4318/v1/traces',
      headers: { 'x-key': 'k' },
      serviceName: 'inference-gateway',
      sampleRatio: 1,
      captureContent: false,
    });
  });

  it('on through OTEL_* alone, which win over the config', () => {
    const s = tracingSettings(configWith({ service_name: 'from-file', sample_ratio: 1 }), {
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318/',
      OTEL_EXPORTER_OTLP_HEADERS: 'authorization=Bearer%20abc, x-tenant=t1',
      OTEL_SERVICE_NAME: 'edge',
      OTEL_TRACES_SAMPLER_ARG: '0.25',
      OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT: 'true',
    });
    expect(s).toEqual({
      endpoint: 'http://collector:4318/v1/traces',
      headers: { authorization: 'Bearer abc', 'x-tenant': 't1' },
      serviceName: 'edge',
      sampleRatio: 0.25,
      captureContent: true,
    });
    expect(tracingSettings(configWith(), { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://t:1/x' })?.endpoint).toBe('http://t:1/x');
    expect(tracingSettings(configWith(), { OTEL_TRACES_EXPORTER: 'otlp' })?.endpoint).toBe('http://localhost:4318/v1/traces');
  });

  it('off again with OTEL_SDK_DISABLED or OTEL_TRACES_EXPORTER=none, whatever else says on', () => {
    expect(tracingSettings(configWith({ enabled: true }), { OTEL_SDK_DISABLED: 'true' })).toBeNull();
    expect(tracingSettings(configWith({ enabled: true }), { OTEL_TRACES_EXPORTER: 'none' })).toBeNull();
  });

  it('a sampler argument out of range keeps the configured ratio', () => {
    expect(tracingSettings(configWith({ enabled: true, sample_ratio: 0.5 }), { OTEL_TRACES_SAMPLER_ARG: '7' })?.sampleRatio).toBe(0.5);
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
