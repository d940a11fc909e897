// The Kubernetes manifests users apply (deploy/kubernetes/gateway.yaml, issue 22): well-formed
// objects that fit together (selectors, ports, the config's path inside the mounted folder), a
// ConfigMap whose config the gateway accepts, probes on routes that answer as a probe needs, a
// grace period longer than the gateway's own drain, and a ConfigMap change — the kubelet's
// symlink swap in the mounted folder — reloading a running gateway.
import { mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse, parseAllDocuments, stringify } from 'yaml';
import { afterEach, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { Deployment } from 'kubernetes-models/apps/v1/Deployment';
import { ConfigMap } from 'kubernetes-models/v1/ConfigMap';
import { Service } from 'kubernetes-models/v1/Service';
import { parseDuration } from '../../../engine/core/duration.js';
import { Gateway } from '../../../engine/kernel/gateway.js';
import { BUILTIN_PLUGINS } from '../../../plugins/index.js';
import { closeAll, memoryLogs, NO_RATE_LIMITS, startGateway, type Started } from '../../helpers/gateway.js';
import { waitFor } from '../../helpers/wait.js';

const docs = parseAllDocuments(readFileSync('deploy/kubernetes/gateway.yaml', 'utf8')).map((d) => d.toJS());
const byKind = (kind: string) => docs.find((d) => d.kind === kind)!;
const configMap = byKind('ConfigMap');
const deployment = byKind('Deployment');
const service = byKind('Service');
const container = deployment.spec.template.spec.containers[0];
const gatewayConfig = parse(configMap.data['config.yaml']);

let gw: Started | null = null;
let other: Gateway | null = null;
afterEach(async () => {
  await closeAll(gw, []);
  await other?.close();
  [gw, other] = [null, null];
});

describe('deploy/kubernetes/gateway.yaml', () => {
  it("passes the Kubernetes API's schemas (kubernetes-models: the types of the fields it knows; it does not refuse unknown fields)", () => {
    const models = { ConfigMap, Deployment, Service } as const;
    for (const d of docs) expect(() => new models[d.kind as keyof typeof models](d).validate(), d.kind).not.toThrow();
    const broken = structuredClone(deployment);
    broken.spec.template.spec.containers[0].readinessProbe.periodSeconds = '5';
    expect(() => new Deployment(broken).validate()).toThrow(/periodSeconds must be integer/);
  });

  it('holds a ConfigMap, a Deployment and a Service that fit together', () => {
    expect(docs.map((d) => `${d.apiVersion} ${d.kind}`)).toEqual(['v1 ConfigMap', 'apps/v1 Deployment', 'v1 Service']);
    for (const d of docs) expect(d.metadata.name).toBe('inference-gateway');
    expect(deployment.spec.selector.matchLabels).toEqual(deployment.spec.template.metadata.labels);
    expect(service.spec.selector).toEqual(deployment.spec.template.metadata.labels);
    const port = container.ports.find((p: { name: string }) => p.name === 'http');
    expect(port.containerPort).toBe(gatewayConfig.server.port);
    expect(service.spec.ports[0].targetPort).toBe('http');
    expect(gatewayConfig.server.host).toBe('0.0.0.0');
    // The config is read from the mounted folder (no subPath: a subPath mount never sees an update).
    const mount = container.volumeMounts.find((m: { name: string }) => m.name === 'config');
    expect(mount.subPath).toBeUndefined();
    const file = container.env.find((e: { name: string }) => e.name === 'GW_CONFIG').value;
    expect(file).toBe(`${mount.mountPath}/config.yaml`);
    expect(deployment.spec.template.spec.volumes[0].configMap.name).toBe(configMap.metadata.name);
    expect(Object.keys(configMap.data)).toEqual(['config.yaml']);
  });

  it('gives the pod longer to stop than the gateway takes to drain, after the preStop pause', () => {
    const grace = deployment.spec.template.spec.terminationGracePeriodSeconds;
    const pause = container.lifecycle.preStop.sleep.seconds;
    expect(grace).toBeGreaterThan(pause + parseDuration(gatewayConfig.server.shutdown_timeout) / 1000);
  });

  it("believes the client address an Ingress forwards, from the cluster's private ranges only (else the per-IP limit is everyone's)", () => {
    expect(gatewayConfig.server.rate_limits).toMatchObject({
      trust_proxy_headers: true,
      trusted_proxy_cidrs: ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16'],
    });
  });

  it('its config is one the gateway serves, and its probes answer as probes need: readiness 503 while no engine is routable, liveness 200', async () => {
    // The ConfigMap's config, on a free loopback port (its engines do not exist here).
    gw = await startGateway({ ...gatewayConfig, server: { ...gatewayConfig.server, host: '127.0.0.1', port: 0 } });
    const probe = async (p: { httpGet: { path: string } }) => {
      const res = await request(`${gw!.url}${p.httpGet.path}`);
      await res.body.dump();
      return res.statusCode;
    };
    expect(await probe(container.livenessProbe)).toBe(200);
    expect(await probe(container.startupProbe)).toBe(200);
    expect(container.readinessProbe.httpGet.path).toBe('/internal/ready');
    await waitFor(() => gw!.gw.runtime.endpoints.all.every((e) => !e.routable) || undefined, 'the absent engines out of rotation');
    expect(await probe(container.readinessProbe)).toBe(503);
  });

  it('a ConfigMap update (the kubelet swaps the ..data link in the mounted folder) reloads a running gateway', async () => {
    // The folder as the kubelet lays it out: config.yaml → ..data/config.yaml, ..data → a timestamped folder.
    const dir = mkdtempSync(join(tmpdir(), 'gw-configmap-'));
    const version = (name: string, level: string) => {
      mkdirSync(join(dir, name));
      const config = {
        server: { host: '127.0.0.1', port: 0, shutdown_timeout: '2s', rate_limits: NO_RATE_LIMITS },
        logging: { level },
        proxy: { profiles_dir: '/nonexistent/profiles' },
        pipelines: { dir: '/nonexistent/pipelines' },
        discovery: { static: { endpoints: [] } },
      };
      writeFileSync(join(dir, name, 'config.yaml'), stringify(config));
    };
    version('..2026_11_26_01', 'info');
    symlinkSync('..2026_11_26_01', join(dir, '..data'));
    symlinkSync('..data/config.yaml', join(dir, 'config.yaml'));
    const { destination } = memoryLogs();
    other = await Gateway.create({ configFile: join(dir, 'config.yaml'), env: {}, logDestination: destination, plugins: BUILTIN_PLUGINS });
    await other.listen();
    expect(other.runtime.config.logging.level).toBe('info');
    // The update: a new folder, a temporary link to it renamed over ..data, the old folder removed.
    version('..2026_11_26_02', 'debug');
    symlinkSync('..2026_11_26_02', join(dir, '..data_tmp'));
    renameSync(join(dir, '..data_tmp'), join(dir, '..data'));
    rmSync(join(dir, '..2026_11_26_01'), { recursive: true });
    await waitFor(() => (other!.runtime.config.logging.level === 'debug' ? true : undefined), 'the new config in force');
    expect(other.runtime.reload.generation).toBe(2);
  });
});
