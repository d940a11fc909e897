import { describe, expect, it } from 'vitest';
import { checkConfig, loadConfig, resolveConfigPath } from '../../../engine/core/config.js';
import { ConfigError } from '../../../engine/core/errors.js';
import { formatProblem } from '../../../engine/core/schema.js';
import { writeConfig } from '../../helpers/gateway.js';
import { mkdtempSync, mkdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

describe('config defaults', () => {
  it('gives the built-in default without a file', () => {
    const { config, source } = loadConfig(null, {});
    expect(source).toBe('(built-in default)');
    expect(config.server).toMatchObject({ host: 'localhost', port: 40114, shutdown_timeout: '10s' });
    expect(config.discovery.static.endpoints).toEqual([
      { name: 'local-runner', type: 'localrunner', url: 'http://localhost:11434', weight: 1, check_interval: '5s', check_timeout: '2s', headers: {} },
    ]);
    expect(config.proxy).toMatchObject({ load_balancer: 'priority', max_retries: 3, response_timeout: '900s' });
    expect(config.translators.msgapi).toEqual({
      enabled: true,
      max_message_size: 10485760,
      passthrough: true,
      strip_billing_header: true,
      thinking_effort: false,
    });
    expect(config.translators.responses).toEqual({ passthrough: true, store: { max_responses: 0, max_bytes: 67108864, ttl: '1h' } });
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
    const { config } = loadConfig(file, {
      GW_SERVER_HOST: '0.0.0.0',
      GW_SERVER_PORT: '9000',
      GW_LOGGING_LEVEL: 'DEBUG',
      GW_DISCOVERY_MODEL_DISCOVERY_ENABLED: 'false',
      GW_DISCOVERY_MODEL_DISCOVERY_INTERVAL: '30s',
    });
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

  it('fails a key written where it does not belong, naming its home', () => {
    const top = writeConfig({ endpoints: [{ name: 'x', type: 'cppengine', url: 'http://127.0.0.1:1' }] });
    expect(checkConfig(top, {}).problems).toEqual([
      {
        level: 'fail',
        field: 'endpoints',
        message: 'unknown key "endpoints" at the top level',
        fix: 'did you mean discovery.static.endpoints? move it there (discovery: static: endpoints: …)',
      },
    ]);
    expect(() => loadConfig(top, {})).toThrow(/did you mean discovery\.static\.endpoints/);
    expect(checkConfig(writeConfig({ discovery: { endpoints: [] } }), {}).problems[0]).toMatchObject({
      level: 'fail',
      field: 'discovery.endpoints',
      fix: expect.stringContaining('discovery.static.endpoints'),
    });
    expect(checkConfig(writeConfig({ port: 8080 }), {}).problems[0]).toMatchObject({
      level: 'fail',
      field: 'port',
      fix: expect.stringMatching(/^did you mean server\.port\?/),
    });
    // A plain word deeper down is not guessed at (timeout is also discovery.model_discovery.timeout).
    expect(checkConfig(writeConfig({ timeout: '5s' }), {}).problems[0]).toMatchObject({ level: 'warn', field: 'timeout' });
  });

  it('says which unit a duration written as a bare number needs', () => {
    const { problems } = checkConfig(writeConfig({ proxy: { response_timeout: 5, connection_timeout: 5000 } }), {});
    expect(problems).toHaveLength(2);
    expect(problems).toEqual(
      expect.arrayContaining([
        {
          level: 'fail',
          field: 'proxy.connection_timeout',
          message: 'must be a duration string such as "5s" (got the number 5000; write 5000ms, or 5s)',
          fix: 'a duration is a number with a unit: 500ms, 5s, 5m, 1h',
        },
        {
          level: 'fail',
          field: 'proxy.response_timeout',
          message: 'must be a duration string such as "5s" (got the number 5; write 5s)',
          fix: 'a duration is a number with a unit: 500ms, 5s, 5m, 1h',
        },
      ]),
    );
    const endpoint = checkConfig(
      writeConfig({ discovery: { static: { endpoints: [{ name: 'x', type: 'cppengine', url: 'http://h', check_interval: 5 }] } } }),
      {},
    );
    expect(endpoint.problems[0]).toMatchObject({ field: 'discovery.static.endpoints[0].check_interval', message: expect.stringContaining('write 5s') });
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

describe('secrets in a config with a mistake', () => {
  const SECRET = 'tok-SECRET-4711';
  const withEndpoint = (extra: Record<string, unknown>) =>
    writeConfig({ discovery: { static: { endpoints: [{ name: 'a', type: 'localrunner', url: 'http://127.0.0.1:1', ...extra }] } } });

  it.each([
    ['a header of the wrong type', { headers: { Authorization: { nested: SECRET } } }, 'headers.Authorization: must be string, got an object (value not shown'],
    ['a header that is a number', { headers: { 'X-Api-Key': 4711 } }, 'headers.X-Api-Key: must be string, got a number (value not shown'],
    [
      'an auth field of the wrong type',
      { auth: { type: 'basic', username: 'u', password: [SECRET] } },
      'auth.password: must be string, got an array (value not shown',
    ],
    [
      'an auth type misspelt with the token in it',
      { auth: { type: `bearer ${SECRET}` } },
      'auth.type: value a string (value not shown: it may be a secret) is not allowed',
    ],
  ])('names the field, never the value: %s', (_what, extra, message) => {
    const { problems } = checkConfig(withEndpoint(extra), {});
    const text = problems.map(formatProblem).join('\n');
    expect(text).toContain(message);
    expect(text).not.toContain(SECRET);
    expect(text).not.toContain('4711');
    expect(() => loadConfig(withEndpoint(extra), {})).toThrow(ConfigError);
    try {
      loadConfig(withEndpoint(extra), {});
    } catch (err) {
      expect(String((err as Error).message)).not.toContain(SECRET);
    }
  });

  it.each([
    [
      'endpoints written as a map',
      { discovery: { static: { endpoints: { gpu: { name: 'gpu', type: 'pagedengine', url: 'http://x', headers: { Authorization: SECRET } } } } } },
      'discovery.static.endpoints: must be array, got an object',
    ],
    [
      'an endpoint written as a list',
      { discovery: { static: { endpoints: [['gpu', { auth: { token: SECRET } }]] } } },
      'discovery.static.endpoints[0]: must be object, got an array',
    ],
  ])('never prints an object or array, which could carry secrets: %s', (_what, config, message) => {
    const text = checkConfig(writeConfig(config), {}).problems.map(formatProblem).join('\n');
    expect(text).toContain(message);
    expect(text).not.toContain(SECRET);
  });

  it('still shows values that are not secret', () => {
    const { problems } = checkConfig(writeConfig({ proxy: { max_retries: 'three' } }), {});
    expect(problems[0].message).toBe('must be integer, got "three"');
  });
});

describe('harmful values', () => {
  it.each([
    [
      'check_interval',
      { discovery: { static: { endpoints: [{ name: 'a', type: 'localrunner', url: 'http://127.0.0.1:1', check_interval: '0s' }] } } },
      'discovery.static.endpoints[0].check_interval',
    ],
    [
      'check_timeout',
      { discovery: { static: { endpoints: [{ name: 'a', type: 'localrunner', url: 'http://127.0.0.1:1', check_timeout: '0ms' }] } } },
      'discovery.static.endpoints[0].check_timeout',
    ],
    ['model_discovery.interval', { discovery: { model_discovery: { interval: '0m' } } }, 'discovery.model_discovery.interval'],
    ['response_timeout', { proxy: { response_timeout: '0.0s' } }, 'proxy.response_timeout'],
    ['read_header_timeout', { server: { read_header_timeout: '0s' } }, 'server.read_header_timeout'],
    ['body_idle_timeout', { server: { body_idle_timeout: '0s' } }, 'server.body_idle_timeout'],
    ['idle_timeout', { server: { idle_timeout: '0s' } }, 'server.idle_timeout'],
  ])('refuses a zero %s, saying why and what to write', (_what, config, field) => {
    const { loaded, problems } = checkConfig(writeConfig(config), {});
    expect(loaded).toBeUndefined();
    expect(problems).toContainEqual(
      expect.objectContaining({
        level: 'fail',
        field,
        message: expect.stringMatching(/must be more than zero$/),
        fix: expect.stringContaining('above zero, such as 5s'),
      }),
    );
  });

  it('ignores a zero interval from the environment too, with a warning', () => {
    const { loaded, problems } = checkConfig(writeConfig({}), { GW_DISCOVERY_MODEL_DISCOVERY_INTERVAL: '0s' });
    expect(loaded?.config.discovery.model_discovery.interval).toBe('5m');
    expect(problems).toContainEqual(
      expect.objectContaining({
        level: 'warn',
        field: 'GW_DISCOVERY_MODEL_DISCOVERY_INTERVAL',
        message: expect.stringContaining('must be a duration above zero'),
      }),
    );
  });

  it('refuses a head timeout longer than the whole-request timeout', () => {
    const { loaded, problems } = checkConfig(writeConfig({ server: { read_header_timeout: '10m', read_timeout: '5m' } }), {});
    expect(loaded).toBeUndefined();
    expect(problems[0]).toMatchObject({ level: 'fail', field: 'server.read_header_timeout', fix: 'make read_header_timeout shorter than read_timeout' });
  });

  it('accepts a zero shutdown_timeout (stop without waiting) and small positive durations', () => {
    const { loaded } = checkConfig(writeConfig({ server: { shutdown_timeout: '0s', read_header_timeout: '0.5s' } }), {});
    expect(loaded?.config.server.shutdown_timeout).toBe('0s');
  });

  it('never rounds a positive duration down to zero', async () => {
    const { parseDuration } = await import('../../../engine/core/duration.js');
    expect(parseDuration('0.1ms')).toBe(1);
    expect(parseDuration('0s')).toBe(0);
  });

  it('warns about a custom folder that does not exist, naming it; the default folder may be absent', () => {
    const dir = mkdtempSync(join(tmpdir(), 'gw-cfg-'));
    const { loaded, problems } = checkConfig(writeConfig({ proxy: { profiles_dir: join(dir, 'profles') }, pipelines: { dir: join(dir, 'pipes') } }), {});
    expect(loaded).toBeDefined();
    expect(problems).toContainEqual(
      expect.objectContaining({
        level: 'warn',
        field: 'proxy.profiles_dir',
        message: `folder ${join(dir, 'profles')} does not exist; no custom profiles are loaded`,
      }),
    );
    expect(problems).toContainEqual(
      expect.objectContaining({
        level: 'warn',
        field: 'pipelines.dir',
        message: `folder ${join(dir, 'pipes')} does not exist; no custom pipelines are loaded`,
      }),
    );
    expect(checkConfig(writeConfig({}), {}).problems).toEqual([]);
  });

  it('fails a folder setting that points at a file', () => {
    const dir = mkdtempSync(join(tmpdir(), 'gw-cfg-'));
    writeFileSync(join(dir, 'file.yaml'), 'x: 1\n');
    const { loaded, problems } = checkConfig(writeConfig({ proxy: { profiles_dir: join(dir, 'file.yaml') } }), {});
    expect(loaded).toBeUndefined();
    expect(problems[0]).toMatchObject({ level: 'fail', field: 'proxy.profiles_dir', message: `${join(dir, 'file.yaml')} is not a folder` });
  });
});

describe('server.rate_limits.redis', () => {
  const problemsOf = (redis: Record<string, unknown>) =>
    checkConfig(writeConfig({ server: { rate_limits: { store: 'redis', redis } } }), {}).problems.map(formatProblem);

  it('checks the URL when the config loads, naming the field and never the URL (it may hold a password)', () => {
    for (const url of ['redis//:hunter2@redis:6379', 'redis://:hunter2@redis:99999', 'redis://:hunter2@redis:6379/x', 'http://:hunter2@redis']) {
      const problems = problemsOf({ url });
      expect(problems.length, url).toBeGreaterThan(0);
      expect(problems.join('\n')).toContain('server.rate_limits.redis');
      expect(problems.join('\n')).not.toContain('hunter2');
    }
    expect(problemsOf({ url: 'rediss://:pw@redis.internal:6380/2' })).toEqual([]);
  });

  it('reads password_file when the config loads: a file it cannot read is a problem naming the field', () => {
    const dir = mkdtempSync(join(tmpdir(), 'gw-redis-'));
    writeFileSync(join(dir, 'pw'), 'hunter2\n');
    expect(problemsOf({ url: 'redis://redis:6379', password_file: join(dir, 'pw') })).toEqual([]);
    const missing = problemsOf({ url: 'redis://redis:6379', password_file: join(dir, 'nope') });
    expect(missing.join('\n')).toContain('server.rate_limits.redis.password_file');
  });
});
