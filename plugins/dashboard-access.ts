// The gate of /internal/ui/: 503 naming the fix when dashboard.enabled is false, 403 for a
// client address outside dashboard.access_policy.allowed_cidrs or a Host header outside its
// allowed_hosts. The policy is compiled once at load (a BlockList); only this route uses it, so
// the status, health and metrics routes stay open to monitoring. The client address is the one
// the rate limits use: behind a trusted proxy (server.rate_limits.trust_proxy_headers) the
// proxy's own loopback address must not open the page to everyone it forwards.
import { definePlugin, gwError } from '../engine/api.js';
import { compileAccessPolicy } from './access/access-policy.js';
import { clientAddressOf } from './access/client-address.js';

export default definePlugin<Record<string, never>>({
  name: 'dashboard-access',
  schema: { type: 'object', additionalProperties: false },
  apply(hooks, _o, env) {
    const { enabled, access_policy } = env.config.dashboard;
    const policy = compileAccessPolicy(access_policy);
    const clientAddress = clientAddressOf(env.config.server.rate_limits, true);
    hooks.request.tap('dashboard-access', (ctx) => {
      if (!enabled) throw gwError('DASHBOARD_DISABLED');
      const reason = policy.refusal(clientAddress(ctx), ctx.header('host'));
      if (reason) throw gwError('DASHBOARD_FORBIDDEN', { reason });
    });
  },
});
