// The long-lived services a compiled graph runs against. They outlive a graph swap.
import type { Logger } from 'pino';
import type { GatewayConfig } from './config.js';
import type { EndpointRegistry } from './endpoints.js';
import type { HealthMonitor } from './health.js';
import type { ProfileSet } from './profiles.js';
import type { Stats } from './telemetry.js';

export interface Runtime {
  config: GatewayConfig;
  /** The config file, or "(built-in default)". */
  source: string;
  profiles: ProfileSet;
  endpoints: EndpointRegistry;
  health: HealthMonitor;
  stats: Stats;
  log: Logger;
  version: string;
  startedAt: Date;
}
