// deploy/compose (issue 22): three gateway replicas behind nginx sharing their rate limits through
// Redis. No docker here: the files are checked for what `docker compose config` and nginx would
// need of them and for fitting together (the replicas' config validates and names the redis
// service; nginx proxies to the gateway service on the port the config listens on, unbuffered, with
// the client's address the gateway is told to trust).
import { readFileSync } from 'node:fs';
import { parse } from 'yaml';
import { describe, expect, it } from 'vitest';
import { validate } from '../../../engine/kernel/validate.js';
import { BUILTIN_PLUGINS } from '../../../plugins/index.js';

const DIR = 'deploy/compose';
const compose = parse(readFileSync(`${DIR}/compose.yaml`, 'utf8'));
const nginx = readFileSync(`${DIR}/nginx.conf`, 'utf8');
const { gateway, nginx: proxy, redis } = compose.services;
const configPath = `${DIR}/config/gateway.yaml`;
const config = parse(readFileSync(configPath, 'utf8'));

describe('deploy/compose', () => {
  it('runs three replicas of the gateway image, a Redis and nginx, each restarted on failure', () => {
    expect(Object.keys(compose.services).sort()).toEqual(['gateway', 'nginx', 'redis']);
    expect(gateway.deploy.replicas).toBe(3);
    expect(gateway.build).toBe('../..');
    expect(gateway.depends_on).toContain('redis');
    expect(proxy.depends_on).toContain('gateway');
    for (const s of [gateway, proxy, redis]) expect(s.restart).toBe('unless-stopped');
    // No replica publishes a port of its own (three would clash): nginx is the way in.
    expect(gateway.ports).toBeUndefined();
    expect(proxy.ports).toEqual(['127.0.0.1:40114:80']);
  });

  it("the replicas' config validates, shares the rate limits through the redis service and trusts nginx's forwarded address", async () => {
    const mount = gateway.volumes.find((v: string) => v.startsWith('./config:'));
    expect(mount).toBe('./config:/etc/gw:ro');
    expect(gateway.environment.GW_CONFIG).toBe('/etc/gw/gateway.yaml');
    const lines: string[] = [];
    expect(await validate(configPath, {}, (l) => lines.push(l), BUILTIN_PLUGINS), lines.join('\n')).toBe(0);
    const limits = config.server.rate_limits;
    expect(limits.store).toBe('redis');
    expect(new URL(limits.redis.url).hostname).toBe('redis');
    expect(limits.trust_proxy_headers).toBe(true);
    expect(config.server.host).toBe('0.0.0.0');
  });

  it('nginx proxies to the gateway service on its port, re-resolving replicas, streams unbuffered, the client address passed on', () => {
    expect(nginx).toContain(`server gateway:${config.server.port} resolve;`);
    expect(nginx).toMatch(/resolver 127\.0\.0\.11\b/);
    expect(nginx).toMatch(/zone gateways \d+k;/);
    expect(nginx).toContain('proxy_pass http://gateways;');
    expect(nginx).toContain('proxy_buffering off;');
    expect(nginx).toContain('proxy_set_header X-Forwarded-For $remote_addr;'); // overwritten: a client cannot pick its address
    expect(nginx).not.toContain('$proxy_add_x_forwarded_for');
    expect(proxy.volumes).toContain('./nginx.conf:/etc/nginx/conf.d/default.conf:ro');
    // nginx's `resolve` on an upstream server needs 1.27.3 or newer.
    const [major, minor] = proxy.image
      .match(/nginx:(\d+)\.(\d+)/)
      .slice(1)
      .map(Number);
    expect(major > 1 || minor >= 27).toBe(true);
  });
});
