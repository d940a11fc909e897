// GET /internal/stats/translators: each translator's counters, busiest first, and a summary, with
// a weak ETag (304 to a poll when nothing moved).
import { definePlugin, formatDuration } from '../engine/api.js';
import { percent } from './reports/endpoint-view.js';
import { replyStatus } from './reports/status-json.js';

const rate = (part: number, whole: number) => (whole ? percent(part, whole) : '0.00%');

export default definePlugin<Record<string, never>>({
  name: 'translator-stats-report',
  terminal: true,
  schema: { type: 'object', additionalProperties: false },
  apply(hooks, _o, env) {
    hooks.dispatch.tapPromise('translator-stats-report', async (ctx) => {
      const stats = await env.hostStats();
      const entries = [...stats.translators]
        .map(([name, t]) => ({
          translator_name: name,
          total_requests: t.total,
          successful_requests: t.succeeded,
          failed_requests: t.failed,
          passthrough_requests: t.passthrough,
          translation_requests: t.translation,
          streaming_requests: t.streaming,
          non_streaming_requests: t.nonStreaming,
          success_rate: rate(t.succeeded, t.total),
          passthrough_rate: rate(t.passthrough, t.total),
          average_latency: formatDuration(t.total ? t.totalLatencyMs / t.total : 0),
          fallback_no_compatible_endpoints: t.fallbackNoCompatibleEndpoints,
          fallback_translator_does_not_support_passthrough: t.fallbackTranslatorDoesNotSupportPassthrough,
          fallback_cannot_passthrough: t.fallbackCannotPassthrough,
          malformed_chunks: t.malformedChunks,
        }))
        .sort((a, b) => b.total_requests - a.total_requests);
      const sum = (k: keyof (typeof entries)[number]) => entries.reduce((n, e) => n + (e[k] as number), 0);
      const total = sum('total_requests');
      return replyStatus(ctx, {
        timestamp: new Date().toISOString(),
        translators: entries,
        summary: {
          total_translators: entries.length,
          active_translators: entries.filter((e) => e.total_requests > 0).length,
          total_requests: total,
          total_passthrough: sum('passthrough_requests'),
          total_translations: sum('translation_requests'),
          total_streaming: sum('streaming_requests'),
          total_non_streaming: sum('non_streaming_requests'),
          overall_success_rate: rate(sum('successful_requests'), total),
          overall_passthrough_rate: rate(sum('passthrough_requests'), total),
        },
      });
    });
  },
});
