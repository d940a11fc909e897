// Which models are loaded now (the cold first-token deadline): read from the family's own report
// (localrunner api/ps, mlxmulti v1/models/status) after each passing health check, by the lookup
// rule, forgotten when the endpoint goes down; from the catalogue where discovery says `loaded`;
// unknown otherwise.
import { afterEach, describe, expect, it } from 'vitest';
import { FakeBackend, type FakeModel } from '../../../engine/demo/index.js';
import { REPORT_LIMIT as RESIDENCY_REPLY_LIMIT } from '../../../engine/backends/engine-reports.js';
import { closeAll, endpoint, startGateway, type Started } from '../../helpers/gateway.js';
import { waitFor } from '../../helpers/wait.js';

let gw: Started | null = null;
let fakes: FakeBackend[] = [];
afterEach(async () => {
  await closeAll(gw, fakes);
  [gw, fakes] = [null, []];
});

/** One endpoint checked only when a test asks (check_interval 60s). */
async function setup(family: string, models: FakeModel[], before?: (f: FakeBackend) => void) {
  const fake = await new FakeBackend({ family, name: 'e', models }).start();
  fakes = [fake];
  before?.(fake);
  gw = await startGateway({ discovery: { static: { endpoints: [endpoint('e', family, fake.url, { check_interval: '60s' })] } } });
  const ep = gw.gw.runtime.endpoints.all[0];
  const residency = gw.gw.runtime.residency;
  return { fake, ep, isLoaded: (model: string) => residency.isLoaded(ep, model) };
}

describe('residency: which models are loaded now', () => {
  it('localrunner: api/ps names the loaded models; "llama3" finds "llama3:latest"; another is not loaded', async () => {
    const { fake, ep, isLoaded } = await setup('localrunner', [{ name: 'llama3:latest', loaded: true }, { name: 'qwen2.5:7b' }]);
    await waitFor(() => isLoaded('llama3') !== undefined, 'the first api/ps report');
    expect([isLoaded('llama3'), isLoaded('llama3:latest'), isLoaded('qwen2.5:7b'), isLoaded('qwen2.5')]).toEqual([true, true, false, false]);
    expect(fake.requestsTo('/api/ps').length).toBeGreaterThan(0);
    // The runner swaps models: the next passing check brings the new report.
    fake.models[0].loaded = false;
    fake.models[1].loaded = true;
    await gw!.gw.runtime.health.check(ep);
    await waitFor(() => isLoaded('qwen2.5:7b') === true, 'the report after the next check');
    expect(isLoaded('llama3')).toBe(false);
  });

  it('mlxmulti: v1/models/status says loaded true or false for each model', async () => {
    const { isLoaded } = await setup('mlxmulti', [{ name: 'mlx-a' }, { name: 'mlx-b', loaded: true }]);
    await waitFor(() => isLoaded('mlx-b') !== undefined, 'the first v1/models/status report');
    expect([isLoaded('mlx-a'), isLoaded('mlx-b'), isLoaded('not-there')]).toEqual([false, true, false]);
  });

  it('is unknown before the first passing check, and forgotten when the endpoint goes down', async () => {
    const { fake, ep, isLoaded } = await setup('localrunner', [{ name: 'llama3:latest' }], (f) => (f.behaviour.healthStatus = 500));
    expect(ep.state).toBe('unhealthy');
    expect(isLoaded('llama3')).toBeUndefined();
    expect(fake.requestsTo('/api/ps')).toHaveLength(0);
    fake.behaviour.healthStatus = 200;
    await gw!.gw.runtime.health.check(ep);
    await waitFor(() => isLoaded('llama3') === true, 'the report once healthy');
    fake.behaviour.healthStatus = 500;
    await gw!.gw.runtime.health.check(ep);
    expect(ep.routable).toBe(false);
    expect(isLoaded('llama3')).toBeUndefined();
  });

  it('a report that fails (larger than 1 MiB) makes it unknown and leaves health and the breaker alone', async () => {
    const { fake, ep, isLoaded } = await setup('localrunner', [{ name: 'llama3:latest', loaded: true }]);
    await waitFor(() => isLoaded('llama3') === true, 'the first report');
    fake.models.push({ name: 'x'.repeat(RESIDENCY_REPLY_LIMIT + 1), loaded: true });
    const asked = fake.requestsTo('/api/ps').length;
    await gw!.gw.runtime.health.check(ep);
    await waitFor(() => fake.requestsTo('/api/ps').length > asked && isLoaded('llama3') === undefined, 'the failed report forgotten');
    expect(ep.state).toBe('healthy');
    expect(ep.breaker).toMatchObject({ state: 'closed', proxyFailures: 0 });
    const failed = gw!.logs.find((l) => l.msg === 'residency report failed; loaded models unknown');
    expect(failed?.err).toBe(`the /api/ps reply larger than ${RESIDENCY_REPLY_LIMIT} bytes`);
  });

  it("is unknown for a family that does not report, unless discovery's list says loaded", async () => {
    const { ep, isLoaded } = await setup('pagedengine', [{ name: 'test-model' }]);
    await waitFor(() => gw!.gw.runtime.catalogue.listOf(ep), 'the model list');
    expect(isLoaded('test-model')).toBeUndefined();
    expect(fakes[0].requestsTo('/api/ps')).toHaveLength(0);
    // What discovery records for engines whose lists say it (LM Studio `state`, mlxmulti `loaded`).
    gw!.gw.runtime.catalogue.set(ep, [
      { name: 'test-model', loaded: false, details: {} },
      { name: 'warm', loaded: true, details: {} },
    ]);
    expect([isLoaded('test-model'), isLoaded('warm'), isLoaded('other')]).toEqual([false, true, undefined]);
  });
});
