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
});
