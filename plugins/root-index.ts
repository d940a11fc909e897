// GET / : where to go from here, instead of a bare 404. JSON for API clients and scripts: the
// version, the routes a newcomer looks for (model list, status, health, the dashboard when it is
// on) and every family's prefixes with how many endpoints the config gives it. A browser (Accept:
// text/html) that the dashboard would let in is sent there (302), as monitoring tools send their
// root to their UI. Built once per configuration: a request reads the Accept header and, for a
// browser, the access policy.
import { definePlugin, mountedPrefixes, type Context } from '../engine/api.js';
import { compileAccessPolicy } from './access/access-policy.js';
import { clientAddressOf } from './access/client-address.js';

const DASHBOARD = '/internal/ui/';
const TO_DASHBOARD = ['location', DASHBOARD, 'vary', 'accept', 'cache-control', 'no-cache'];
const VARY = ['vary', 'accept'];

export default definePlugin<Record<string, never>>({
  name: 'root-index',
  terminal: true,
  schema: { type: 'object', additionalProperties: false },
  apply(hooks, _o, env) {
    const { config, profiles } = env;
    const dashboard = config.dashboard.enabled;
    const msgapi = config.translators.msgapi.enabled;
    const configured = new Map<string, number>();
    for (const e of config.discovery.static.endpoints) {
      // A type no profile names is served as auto (the gateway warns about it at load).
      const family = profiles.byType.get(e.type)?.name ?? 'auto';
      configured.set(family, (configured.get(family) ?? 0) + 1);
    }
    const families: Record<string, { prefixes: string[]; endpoints: number }> = {};
    for (const p of profiles.list) {
      families[p.name] = {
        prefixes: mountedPrefixes(p, config.proxy.enable_optional_prefixes).map((n) => `/gw/${n}/`),
        endpoints: configured.get(p.name) ?? 0,
      };
    }
    const body = JSON.stringify({
      service: 'inference-gateway',
      version: env.version,
      message: `An inference gateway: every model through one OpenAI-compatible base URL, /gw/openai/v1/; a backend family's own API under one of its prefixes (families), any family's under /gw/proxy/${msgapi ? ', the messages API under /gw/msgapi/v1/' : ''}; GET /gw/models lists the models and aliases served.`,
      ...(configured.size === 0 && { hint: 'no endpoint is configured: add your backends under discovery.static.endpoints in the config file' }),
      links: {
        ...(dashboard && { dashboard: DASHBOARD }),
        models: '/gw/models',
        openai_models: '/gw/openai/v1/models',
        status: '/internal/status',
        endpoints: '/internal/status/endpoints',
        health: '/internal/health',
        ready: '/internal/ready',
        ...(msgapi && { msgapi_models: '/gw/msgapi/v1/models' }),
        version: '/version',
      },
      families,
    });
    const json = ['content-type', 'application/json; charset=utf-8', ...VARY];

    const policy = compileAccessPolicy(config.dashboard.access_policy);
    const clientAddress = clientAddressOf(config.server.rate_limits, true);
    const toDashboard = dashboard
      ? (ctx: Context) => ctx.header('accept')?.includes('text/html') === true && !policy.refusal(clientAddress(ctx), ctx.header('host'))
      : () => false;

    hooks.dispatch.tap('root-index', (ctx) => (toDashboard(ctx) ? ctx.reply(302, null, TO_DASHBOARD) : ctx.reply(200, body, json)));
  },
});
