import { describe, it, expect } from 'vitest';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
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

  it('watches a folder whose own folder did not exist either, once it appears: what is in it reloads, and its edits after', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'gw-reloader-'));
    const pipelines = join(dir, 'config', 'pipelines');
    const reasons: string[] = [];
    const reloader = new Reloader(async (reason) => void reasons.push(reason), pino({ level: 'silent' }));
    try {
      await reloader.watch([pipelines]);
      mkdirSync(pipelines, { recursive: true });
      writeFileSync(join(pipelines, 'mine.yaml'), 'a: 1\n');
      await waitFor(() => reasons.length > 0, 'the new folder to be read', 10_000);
      const seen = reasons.length;
      // Watched from now: an edit is seen as any other.
      writeFileSync(join(pipelines, 'mine.yaml'), 'a: 2\n');
      await waitFor(() => reasons.length > seen || undefined, 'an edit in it to be seen', 10_000);
    } finally {
      await reloader.close();
    }
  });
});
