// GET /internal/ready: whether this gateway should be sent traffic now, for a load balancer's or
// Kubernetes' readiness probe. 200 while some endpoint is routable and the gateway is not
// shutting down; 503 otherwise, saying why (no endpoint routable: every request would fail; the
// gateway draining: it finishes what it holds and takes nothing new). /internal/health answers
// 200 whatever the backends' state, so it is the liveness probe.
import { definePlugin } from '../engine/api.js';

export default definePlugin<Record<string, never>>({
  name: 'ready-report',
  terminal: true,
  schema: { type: 'object', additionalProperties: false },
  apply(hooks, _o, env) {
    hooks.dispatch.tap('ready-report', (ctx) => {
      const all = env.endpoints.all.filter((e) => !e.retired);
      let routable = 0;
      for (const e of all) if (e.routable) routable++;
      const reason = env.stats.draining
        ? 'draining: the gateway is shutting down'
        : routable === 0
          ? all.length
            ? `no endpoint is routable (${all.length} configured)`
            : 'no endpoint is configured'
          : undefined;
      return ctx.replyJson(reason ? 503 : 200, { ready: !reason, ...(reason ? { reason } : {}), routable_endpoints: routable, endpoints: all.length }, [
        'cache-control',
        'no-cache',
      ]);
    });
  },
});
