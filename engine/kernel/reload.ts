// Watching what a reload reads (chokidar): a burst of changes (an editor's save, a folder
// copied in) becomes one reload once it settles, and reloads never overlap — a change during
// one schedules one more after it.
import { watch, type FSWatcher } from 'chokidar';
import { existsSync } from 'node:fs';
import { basename, dirname } from 'node:path';
import type { Logger } from 'pino';

const SETTLE_MS = 100;

export class Reloader {
  private watcher: FSWatcher | null = null;
  private watched = new Set<string>();
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private again = false;
  private closed = false;

  constructor(
    private readonly reload: (reason: string) => Promise<unknown>,
    private readonly log: Logger,
  ) {}

  /** Watch exactly these paths (files or folders, existing or not yet): the watcher is kept
   *  and told the difference, so no change is lost while a new one would scan. */
  watch(paths: readonly string[]): Promise<void> {
    if (this.closed) return Promise.resolve();
    const next = new Set(paths);
    let ready = Promise.resolve();
    if (!this.watcher) {
      const watcher = (this.watcher = watch([...next], { ignoreInitial: true }));
      // Changes made before the first scan is over would go unseen: callers wait for it, and
      // for each path itself (chokidar's 'ready' can come before a file's own watch when a
      // path is missing, as profiles_dir often is).
      ready = new Promise<void>((done) => watcher.once('ready', () => done())).then(() => this.settled(watcher, [...next]));
      watcher.on('all', () => this.changed());
      watcher.on('error', (err) => this.log.warn({ err }, 'watching for configuration changes failed'));
    } else {
      const gone = [...this.watched].filter((p) => !next.has(p));
      const added = [...next].filter((p) => !this.watched.has(p));
      if (gone.length) this.watcher.unwatch(gone);
      if (added.length) {
        this.watcher.add(added);
        ready = this.settled(this.watcher, added);
      }
    }
    this.watched = next;
    return ready;
  }

  /** Resolves once chokidar watches each path: one that exists by its own watch, one not there
   *  yet through its folder (when that exists). Bounded: a few seconds at most. */
  private async settled(watcher: FSWatcher, paths: string[]): Promise<void> {
    const watching = (p: string) => {
      const listed = watcher.getWatched()[dirname(p)];
      if (existsSync(p)) return listed?.includes(basename(p)) ?? false;
      return listed !== undefined || !existsSync(dirname(p));
    };
    for (let i = 0; i < 500 && !this.closed; i++) {
      if (paths.every(watching)) return;
      await new Promise((r) => setTimeout(r, 10));
    }
  }

  /** Stop watching (pipelines.watch turned off); SIGHUP still reloads. */
  unwatch(): void {
    void this.watcher?.close();
    this.watcher = null;
    this.watched = new Set();
  }

  private changed(): void {
    if (this.closed) return;
    if (this.timer) this.timer.refresh();
    else
      this.timer = setTimeout(() => {
        this.timer = null;
        void this.trigger('file change');
      }, SETTLE_MS);
  }

  /** Reload now, or once more after the reload under way. A reload that throws is logged and
   *  never stops the next one. */
  trigger(reason: string): Promise<void> {
    if (this.running) {
      this.again = true;
      return this.running;
    }
    this.running = (async () => {
      try {
        do {
          this.again = false;
          try {
            await this.reload(reason);
          } catch (err) {
            this.log.error({ err, reason }, 'reload failed unexpectedly');
          }
        } while (this.again && !this.closed);
      } finally {
        this.running = null;
      }
    })();
    return this.running;
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    await this.watcher?.close();
    await this.running;
  }
}
