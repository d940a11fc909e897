import { existsSync } from 'node:fs';
import { dirname } from 'node:path';
import { describe, expect, it } from 'vitest';
import { startDemo } from '../../../engine/demo/start.js';
import { BUILTIN_PLUGINS } from '../../../plugins/index.js';

describe('gw demo', () => {
  it('serves every simulated family, and leaves nothing behind when it stops (its config folder removed)', async () => {
    const demo = await startDemo(0, BUILTIN_PLUGINS, '127.0.0.1');
    const folder = dirname(demo.gateway.runtime.source);
    expect(existsSync(folder)).toBe(true);
    const res = await fetch(`http://127.0.0.1:${demo.gateway.port}/internal/health`);
    expect(res.status).toBe(200);
    await demo.stop();
    expect(existsSync(folder)).toBe(false);
  });

  it('has an Ollama with one GPU for two models, its queue served by model: each switch takes the time given', async () => {
    const demo = await startDemo(0, BUILTIN_PLUGINS, '127.0.0.1', 200);
    try {
      const base = `http://127.0.0.1:${demo.gateway.port}`;
      for (const model of ['planner', 'coder']) {
        const started = performance.now();
        const res = await fetch(`${base}/gw/ollama/api/chat`, {
          method: 'POST',
          body: JSON.stringify({ model, stream: false, messages: [{ role: 'user', content: 'hi' }] }),
        });
        expect(res.status).toBe(200);
        await res.text();
        expect(performance.now() - started).toBeGreaterThanOrEqual(200);
      }
      const status = (await (await fetch(`${base}/internal/status/endpoints`)).json()) as any;
      const gpu = status.endpoints.find((e: any) => e.name === 'demo-one-gpu');
      expect(gpu.queue.model_switching).toMatchObject({ models_at_once: 1, held: ['coder'], switches: 2 });
      expect(demo.fakes.find((f) => f.name === 'demo-one-gpu')!.gpu!.switches).toBe(2);
    } finally {
      await demo.stop();
    }
  });
});
