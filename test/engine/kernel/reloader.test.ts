import { describe, it, expect } from 'vitest';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pbkdf2 } from 'node:crypto';
import pino from 'pino';
import { Reloader } from '../../../engine/kernel/reload.js';
import { waitFor } from '../../helpers/wait.js';

/** Keep all but one of libuv's threads busy, so file-system calls run one at a time, in the
 *  order they were asked for: the order that makes a watcher's "ready" come too early. */
function occupyThreadPool(): Promise<unknown> {
  const threads = Number(process.env.UV_THREADPOOL_SIZE) || 4;
  return Promise.all(Array.from({ length: threads - 1 }, () => new Promise((done) => pbkdf2('x', 'y', 400_000, 64, 'sha512', done))));
}

describe('the reloader', () => {
  it('watches every path before it says it is watching, missing folders listed first included', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'gw-reloader-'));
    const file = join(dir, 'config.yaml');
    writeFileSync(file, 'a: 1\n');
    const reasons: string[] = [];
    const reloader = new Reloader(async (reason) => void reasons.push(reason), pino({ level: 'silent' }));
    const busy = occupyThreadPool();
    try {
      await reloader.watch(['/nonexistent/gw-profiles', '/nonexistent/gw-pipelines', file]);
      writeFileSync(file, 'a: 2\n');
      await waitFor(() => reasons.length > 0, 'the change to be seen', 10_000);
      expect(reasons).toEqual(['file change']);
    } finally {
      await busy;
      await reloader.close();
    }
  });
});
