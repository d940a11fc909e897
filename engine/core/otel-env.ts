// The standard OpenTelemetry variables (the SDK configuration spec), read into the config's
// `tracing` and `metrics` keys like every GW_* override: they win over the file, a value that
// cannot be used is a warning naming the variable, and `gw validate` and /internal/status show
// the effect. The table runs in its order: what turns tracing off comes last and wins.
import type { GatewayConfig } from './config.js';

type Override = (cfg: GatewayConfig, raw: string) => string | undefined;

const ON = new Set(['true', '1', 'yes', 'on']);
const list = (v: string) => v.split(',').map((s) => s.trim());

/** name=value,… with percent-encoded values; undefined when a pair has no name. */
function headerList(text: string): Record<string, string> | undefined {
  const out: Record<string, string> = {};
  for (const pair of text.split(',')) {
    if (!pair.trim()) continue;
    const eq = pair.indexOf('=');
    if (eq <= 0) return undefined;
    out[pair.slice(0, eq).trim()] = decodeURIComponent(pair.slice(eq + 1).trim());
  }
  return out;
}

/** Variables whose values may hold credentials (a collector's key, a URL's userinfo): a warning
 *  about one never repeats its value. */
export const SECRET_ENV = new Set([
  'OTEL_EXPORTER_OTLP_ENDPOINT',
  'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT',
  'OTEL_EXPORTER_OTLP_HEADERS',
  'OTEL_EXPORTER_OTLP_TRACES_HEADERS',
]);

const url = (v: string) => /^https?:\/\//.test(v.trim());

export const OTEL_OVERRIDES: Record<string, Override> = {
  OTEL_SEMCONV_STABILITY_OPT_IN: (c, v) =>
    list(v).includes('gen_ai_latest_experimental') ? void (c.metrics.gen_ai_conventions = 'latest_experimental') : undefined,
  OTEL_EXPORTER_OTLP_ENDPOINT: (c, v) =>
    url(v) ? void Object.assign(c.tracing, { enabled: true, endpoint: `${v.trim().replace(/\/+$/, '')}/v1/traces` }) : 'must be an http(s) URL',
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: (c, v) => (url(v) ? void Object.assign(c.tracing, { enabled: true, endpoint: v.trim() }) : 'must be an http(s) URL'),
  OTEL_EXPORTER_OTLP_HEADERS: (c, v) => {
    const h = headerList(v);
    return h ? void (c.tracing.headers = h) : 'must be name=value pairs separated by commas';
  },
  OTEL_EXPORTER_OTLP_TRACES_HEADERS: (c, v) => {
    const h = headerList(v);
    return h ? void (c.tracing.headers = h) : 'must be name=value pairs separated by commas';
  },
  OTEL_SERVICE_NAME: (c, v) => (v.trim() ? void (c.tracing.service_name = v.trim()) : 'must not be empty'),
  OTEL_TRACES_SAMPLER_ARG: (c, v) => {
    const ratio = Number(v);
    return v.trim() !== '' && ratio >= 0 && ratio <= 1 ? void (c.tracing.sample_ratio = ratio) : 'must be a number from 0 to 1';
  },
  OTEL_BSP_SCHEDULE_DELAY: (c, v) => {
    const ms = Number(v);
    return v.trim() !== '' && Number.isInteger(ms) && ms > 0 ? void (c.tracing.batch_delay = `${ms}ms`) : 'must be a whole number of milliseconds above 0';
  },
  OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT: (c, v) => void (c.tracing.capture_content = ON.has(v.trim().toLowerCase())),
  OTEL_TRACES_EXPORTER: (c, v) => {
    const names = list(v);
    if (names.includes('none')) return void (c.tracing.enabled = false);
    return names.includes('otlp') ? void (c.tracing.enabled = true) : undefined;
  },
  OTEL_SDK_DISABLED: (c, v) => (ON.has(v.trim().toLowerCase()) ? void (c.tracing.enabled = false) : undefined),
};
