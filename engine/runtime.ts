// The long-lived services a compiled graph runs against. They outlive a graph swap.
import type { Logger } from 'pino';
import type { GatewayConfig } from './config.js';
import { EndpointRegistry, type EndpointPlan } from './endpoints.js';
import { HealthMonitor } from './health.js';
import { Catalogue } from './models/catalogue.js';
import { DiscoveryService } from './models/discovery.js';
import type { ProfileSet } from './profiles.js';
import { Stats } from './telemetry.js';

export interface Runtime {
  config: GatewayConfig;
  /** The config file, or "(built-in default)". */
  source: string;
  profiles: ProfileSet;
  endpoints: EndpointRegistry;
  health: HealthMonitor;
  catalogue: Catalogue;
  discovery: DiscoveryService;
  stats: Stats;
  log: Logger;
  version: string;
  startedAt: Date;
}

export function createRuntime(opts: { config: GatewayConfig; source: string; profiles: ProfileSet; plans: EndpointPlan[]; log: Logger; version: string }): Runtime {
  const { config, log } = opts;
  const endpoints = new EndpointRegistry(opts.plans, config);
  const catalogue = new Catalogue(endpoints.all);
  return {
    config, source: opts.source, profiles: opts.profiles, endpoints, log, version: opts.version, startedAt: new Date(),
    health: new HealthMonitor(endpoints, log),
    catalogue,
    discovery: new DiscoveryService(endpoints, catalogue, config, log),
    stats: new Stats(),
  };
}
