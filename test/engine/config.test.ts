import { describe, expect, it } from 'vitest';
import { checkConfig, loadConfig, resolveConfigPath } from '../../engine/config.js';
import { ConfigError } from '../../engine/errors.js';
import { writeConfig } from '../helpers/gateway.js';
import { mkdtempSync, mkdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

describe('config defaults', () => {
  it('gives the built-in default without a file', () => {
    const { config, source } = loadConfig(null, {});
    expect(source).toBe('(built-in default)');
    expect(config.server).toMatchObject({ host: 'localhost', port: 40114, shutdown_timeout: '10s' });
    expect(config.discovery.static.endpoints).toEqual([
      { name: 'local-runner', type: 'localrunner', url: 'http://localhost:11434', check_interval: '5s', check_timeout: '2s', headers: {} },
    ]);
    expect(config.proxy).toMatchObject({ load_balancer: 'priority', max_retries: 3, response_timeout: '900s' });
    expect(config.translators.msgapi).toEqual({ enabled: true, max_message_size: 10485760 });
    expect(config.server.rate_limits.per_endpoint.default_requests_per_minute).toBe(200);
  });

  it('treats an empty file as all defaults', () => {
    const file = writeConfig({});
    writeFileSync(file, '');
    expect(loadConfig(file, {}).config.server.port).toBe(40114);
  });

  it('deep-freezes the result', () => {
    const { config } = loadConfig(null, {});
    expect(Object.isFrozen(config.server.request_limits)).toBe(true);
    expect(Object.isFrozen(config.discovery.static.endpoints[0])).toBe(true);
  });
});

describe('environment overrides', () => {
  it('win over the file', () => {
    const file = writeConfig({ server: { host: 'a', port: 1 }, logging: { level: 'warn' } });
    const { config } = loadConfig(file, { GW_SERVER_HOST: '0.0.0.0', GW_SERVER_PORT: '9000', GW_LOGGING_LEVEL: 'DEBUG', GW_DISCOVERY_MODEL_DISCOVERY_ENABLED: 'false', GW_DISCOVERY_MODEL_DISCOVERY_INTERVAL: '30s' });
    expect(config.server).toMatchObject({ host: '0.0.0.0', port: 9000 });
    expect(config.logging.level).toBe('debug');
    expect(config.discovery.model_discovery).toMatchObject({ enabled: false, interval: '30s' });
  });

  it('an invalid logging.level in the file warns and falls back to info', () => {
    const { config, problems } = loadConfig(writeConfig({ logging: { level: 'verbose' } }), {});
    expect(config.logging.level).toBe('info');
    expect(problems).toEqual([expect.objectContaining({ level: 'warn', field: 'logging.level' })]);
    expect(loadConfig(writeConfig({ logging: { level: 'WARN' } }), {}).config.logging.level).toBe('warn');
  });

  it('warn and fall back on invalid values', () => {
    const file = writeConfig({ logging: { level: 'warn' } });
    const { config, problems } = loadConfig(file, { GW_LOGGING_LEVEL: 'loud', GW_SERVER_PORT: 'eighty' });
    expect(config.logging.level).toBe('warn');
    expect(config.server.port).toBe(40114);
    expect(problems.map((p) => p.field)).toEqual(['GW_SERVER_PORT', 'GW_LOGGING_LEVEL']);
    expect(problems.every((p) => p.level === 'warn')).toBe(true);
  });
});

describe('config problems', () => {
  it('fails a misspelled key and names the fix', () => {
    const file = writeConfig({ server: { prot: 8080 } });
    const { problems } = checkConfig(file, {});
    expect(problems).toEqual([{ level: 'fail', field: 'server.prot', message: 'unknown key "prot"', fix: 'did you mean "port"? rename it to server.port' }]);
    expect(() => loadConfig(file, {})).toThrow(/server\.prot.*unknown key "prot"[\s\S]*did you mean "port"/);
  });

  it('warns about an unknown key that resembles nothing, and ignores it', () => {
    const file = writeConfig({ server: { flavour: 'vanilla' } });
    const { config, problems } = loadConfig(file, {});
    expect(problems[0]).toMatchObject({ level: 'warn', field: 'server.flavour' });
    expect((config.server as any).flavour).toBeUndefined();
  });

  it('names the file, field and allowed values for a bad enum', () => {
    const file = writeConfig({ proxy: { load_balancer: 'fastest' } });
    try {
      loadConfig(file, {});
      expect.unreachable();
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigError);
      expect((err as ConfigError).file).toBe(file);
      expect((err as ConfigError).field).toBe('proxy.load_balancer');
      expect((err as Error).message).toContain('priority, round-robin, least-connections');
    }
  });

  it('explains a bad duration', () => {
    const { problems } = checkConfig(writeConfig({ server: { shutdown_timeout: '10 seconds' } }), {});
    expect(problems[0]).toMatchObject({ field: 'server.shutdown_timeout', fix: expect.stringContaining('5s') });
  });

  it('reports YAML syntax errors with line and column', () => {
    const file = writeConfig({});
    writeFileSync(file, 'server:\n  port: [1, 2\n');
    const { problems } = checkConfig(file, {});
    expect(problems[0].level).toBe('fail');
    expect(problems[0].field).toMatch(/^line \d+, column \d+$/);
  });
});

describe('config lookup', () => {
  it('prefers --config, then GW_CONFIG, then ./config/config.yaml, then the default', () => {
    const dir = mkdtempSync(join(tmpdir(), 'gw-cwd-'));
    expect(resolveConfigPath(undefined, {}, dir)).toBeNull();
    mkdirSync(join(dir, 'config'));
    writeFileSync(join(dir, 'config/config.yaml'), '');
    expect(resolveConfigPath(undefined, {}, dir)).toBe(join(dir, 'config/config.yaml'));
    expect(resolveConfigPath(undefined, { GW_CONFIG: 'env.yaml' }, dir)).toBe(join(dir, 'env.yaml'));
    expect(resolveConfigPath('cli.yaml', { GW_CONFIG: 'env.yaml' }, dir)).toBe(join(dir, 'cli.yaml'));
  });
});
