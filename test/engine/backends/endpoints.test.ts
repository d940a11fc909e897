import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../../engine/core/config.js';
import { joinEndpointUrl, planEndpoints } from '../../../engine/backends/endpoint-plans.js';
import { loadProfiles } from '../../../engine/core/profiles.js';
import { EndpointRegistry } from '../../../engine/backends/registry.js';
import { writeConfig } from '../../helpers/gateway.js';

const profiles = loadProfiles('/nonexistent');
const plan = (endpoints: object[]) => {
  const file = writeConfig({ discovery: { static: { endpoints } } });
  return { file, ...planEndpoints(loadConfig(file, {}).config, profiles, file) };
};

describe('endpoint records', () => {
  it('fills health and model URLs from the profile, keeping the base path', () => {
    const { plans } = plan([
      { name: 'p', type: 'pagedengine', url: 'http://gpu:8000/prefix/' },
      { name: 'n', type: 'npuengine', url: 'http://npu:8000' },
    ]);
    expect(plans[0]).toMatchObject({
      healthUrl: 'http://gpu:8000/prefix/health',
      modelUrl: 'http://gpu:8000/prefix/v1/models',
      priority: 80,
      checkIntervalMs: 5000,
      checkTimeoutMs: 2000,
    });
    expect(plans[1]).toMatchObject({ healthUrl: 'http://npu:8000/api/v1/health', modelUrl: 'http://npu:8000/api/v1/models' });
  });

  it('takes relative and absolute overrides', () => {
    const { plans } = plan([
      {
        name: 'a',
        type: 'localrunner',
        url: 'http://h:1/base',
        health_check_url: '/ping',
        model_url: 'http://other:2/list',
        priority: 7,
        check_interval: '1m',
      },
    ]);
    expect(plans[0]).toMatchObject({ healthUrl: 'http://h:1/base/ping', modelUrl: 'http://other:2/list', priority: 7, checkIntervalMs: 60_000 });
    expect(joinEndpointUrl(new URL('http://h/x/'), 'y')).toBe('http://h/x/y');
  });

  it('takes concurrency limits from the profile, the endpoint winning; warns about queue keys without a limit', () => {
    const { plans, problems } = plan([
      { name: 'd', type: 'deskrunner', url: 'http://d' },
      { name: 'e', type: 'deskrunner', url: 'http://e', max_concurrent_requests: 3, max_queued_requests: 7, queue_timeout: '10s' },
      { name: 'off', type: 'deskrunner', url: 'http://off', max_concurrent_requests: 0 },
      { name: 'gpu', type: 'pagedengine', url: 'http://gpu', max_queued_requests: 5 },
      // An engine that holds one model at a time: a queue served by model, with no limit on slots.
      { name: 'one', type: 'ollama', url: 'http://one', max_concurrent_requests: 0, model_switching: { models_at_once: 1, max_wait: '20s', min_dwell: '0s' } },
    ]);
    expect(plans.map((p) => p.concurrency)).toEqual([
      { maxConcurrent: 1, maxQueued: 100, timeoutMs: 120_000 },
      { maxConcurrent: 3, maxQueued: 7, timeoutMs: 10_000 },
      null,
      null,
      { maxConcurrent: Number.POSITIVE_INFINITY, maxQueued: 100, timeoutMs: 120_000, turns: { atOnce: 1, maxWaitMs: 20_000, minDwellMs: 0 } },
    ]);
    expect(problems).toEqual([
      expect.objectContaining({
        level: 'warn',
        field: 'discovery.static.endpoints[3].max_queued_requests',
        message: expect.stringContaining('has no effect: endpoint "gpu" has no concurrency limit'),
      }),
    ]);
  });

  it('warns when a request passed over for another model could time out before its turn', () => {
    const { problems } = plan([
      { name: 'one', type: 'ollama', url: 'http://one', queue_timeout: '30s', model_switching: { models_at_once: 1, max_wait: '30s', min_dwell: '5s' } },
    ]);
    expect(problems).toEqual([
      expect.objectContaining({
        level: 'warn',
        field: 'discovery.static.endpoints[0].model_switching.max_wait',
        message: expect.stringContaining('max_wait + min_dwell (35s) is not under its queue_timeout (30s)'),
      }),
    ]);
  });

  it('selects the hosted profile for both of its tokens', () => {
    const { plans } = plan([
      { name: 'a', type: 'hosted', url: 'http://h' },
      { name: 'b', type: 'hosted-compatible', url: 'http://h' },
    ]);
    expect(plans.map((p) => p.profile.name)).toEqual(['hosted-compatible', 'hosted-compatible']);
  });

  it('refuses a URL with credentials without echoing them, suggesting an auth block', () => {
    const { problems } = plan([{ name: 'gpu', type: 'pagedengine', url: 'http://admin:hunter2@gpu:8000/v' }]);
    expect(problems).toHaveLength(1);
    const text = JSON.stringify(problems);
    expect(text).not.toContain('hunter2');
    expect(text).not.toContain('admin');
    expect(problems[0].field).toBe('discovery.static.endpoints[0].url');
    expect(problems[0].message).toContain('"gpu"');
    expect(problems[0].fix).toContain('url: http://gpu:8000/v');
    expect(problems[0].fix).toContain('auth: { type: basic, username: <username>, password_file: /run/secrets/gpu-password }');
  });

  it('offers basic and bearer alternatives for a username-only URL', () => {
    const { problems } = plan([{ name: 'h', type: 'hosted', url: 'https://sk-abc123@api.example/v1' }]);
    expect(JSON.stringify(problems)).not.toContain('sk-abc123');
    expect(problems[0].fix).toContain('type: basic');
    expect(problems[0].fix).toContain('type: bearer');
  });

  it('fails a type that names no family, with the one family it most likely meant (and none to suggest: auto)', () => {
    const { plans, problems } = plan([
      { name: 'x', type: 'pagedengin', url: 'http://h' },
      { name: 'y', type: 'auto', url: 'http://g' },
      { name: 'z', type: 'LM-Studio', url: 'http://i' },
      { name: 'w', type: 'qqqqqq', url: 'http://j' },
    ]);
    expect(problems).toEqual([
      {
        level: 'fail',
        field: 'discovery.static.endpoints[0].type',
        message: 'unknown backend family "pagedengin" for endpoint "x"',
        fix: 'did you mean "pagedengine" (vLLM)? write type: pagedengine',
      },
      expect.objectContaining({ field: 'discovery.static.endpoints[2].type', fix: 'did you mean "deskrunner" (LM Studio)? write type: deskrunner' }),
      expect.objectContaining({
        field: 'discovery.static.endpoints[3].type',
        fix: 'write its family (docs/reference/profiles.md lists them with their engines), or type: auto for any OpenAI-compatible server',
      }),
    ]);
    // auto is a generic OpenAI-compatible backend: health /, models /v1/models.
    expect(plans.map((p) => [p.profile.name, p.healthUrl, p.modelUrl])).toEqual([['auto', 'http://g/', 'http://g/v1/models']]);
  });

  it("takes the engines' own names as their families' types (ollama, llamacpp, llama.cpp, vllm, sglang, lmstudio, openai…)", () => {
    const types = ['ollama', 'llamacpp', 'llama.cpp', 'llama-server', 'vllm', 'sglang', 'lmstudio', 'openai', 'litellm', 'lemonade', 'lmdeploy', 'mlx-lm'];
    const { plans, problems } = plan(types.map((type, i) => ({ name: `e${i}`, type, url: `http://h${i}` })));
    expect(problems).toEqual([]);
    expect(plans.map((p) => p.profile.name)).toEqual([
      'localrunner',
      'cppengine',
      'cppengine',
      'cppengine',
      'pagedengine',
      'radixengine',
      'deskrunner',
      'hosted-compatible',
      'multigateway',
      'npuengine',
      'turboengine',
      'mlxsingle',
    ]);
  });

  it('flags two endpoints that are the same backend, asked the same way (two keys for one service are two)', () => {
    const { problems } = plan([
      { name: 'x', type: 'cppengine', url: 'http://h:1' },
      { name: 'y', type: 'cppengine', url: 'http://h:1/' },
      { name: 'z', type: 'hosted', url: 'http://h:1', headers: { authorization: 'Bearer other' } },
    ]);
    expect(problems).toEqual([
      {
        level: 'warn',
        field: 'discovery.static.endpoints[1].url',
        message:
          'endpoints "x" and "y" are the same backend (http://h:1, asked the same way): it is counted twice (its load, its health checks) and its conversations are split between the two',
        fix: 'remove one of them; two backends need two urls',
      },
    ]);
  });

  it('refuses duplicate names and unreadable secret files', () => {
    const { problems } = plan([
      { name: 'x', type: 'localrunner', url: 'http://h' },
      { name: 'x', type: 'localrunner', url: 'http://h', auth: { type: 'basic', username: 'u', password_file: '/nonexistent/pw' } },
    ]);
    expect(problems.map((p) => p.field)).toEqual(['discovery.static.endpoints[1].name', 'discovery.static.endpoints[1].auth.password_file']);
  });
});

describe('an endpoint found down tells the attempts under way', () => {
  const BREAKER = { healthFailures: 3, proxyFailures: 5, initialOpenMs: 1000, maxOpenMs: 30_000, jitter: 0 };
  const told = () => new Promise((r) => setImmediate(r));

  it('leaving rotation and its breaker opening tell them, on the next tick; a state that stays routable does not', async () => {
    const registry = new EndpointRegistry({ markFailed() {}, markAnswered() {} });
    registry.reconcile(plan([{ name: 'p', type: 'pagedengine', url: 'http://127.0.0.1:9' }]).plans, BREAKER);
    const [ep] = registry.all;
    const heard: string[] = [];
    ep.underWay.add({ endpointDown: (reason) => heard.push(reason) });
    registry.setState(ep, 'healthy');
    registry.setState(ep, 'busy');
    registry.setState(ep, 'offline', 'timed out');
    expect(heard).toEqual([]);
    await told();
    expect(heard).toEqual(['offline: timed out']);
    registry.setState(ep, 'unhealthy', 'connection refused');
    for (let i = 0; i < 3; i++) ep.breaker.healthFailure();
    await told();
    expect(heard).toEqual(['offline: timed out', 'its circuit breaker opened']);
    await registry.close();
  });
});
