// Watching what a reload reads (chokidar): a burst of changes (an editor's save, a folder
// copied in) becomes one reload once it settles, and reloads never overlap — a change during
// one schedules one more after it. A path whose folder does not exist either (a pipelines
// folder under one not made yet) cannot be watched: it is looked for every second, and watched
// (and reloaded from) once its folder appears.
import { watch, type FSWatcher } from 'chokidar';
import { existsSync } from 'node:fs';
import { basename, dirname } from 'node:path';
import type { Logger } from 'pino';

const SETTLE_MS = 100;
/** How often paths whose folder does not exist yet are looked for. */
const MISSING_MS = 1_000;

export class Reloader {
  private watcher: FSWatcher | null = null;
  private watched = new Set<string>();
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private again = false;
  private closed = false;
  /** Watched paths whose folder does not exist: chokidar sees nothing of them until it does. */
  private missing = new Set<string>();
  private poll: NodeJS.Timeout | null = null;

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
    this.lookForMissing(next);
    return ready;
  }

  /** Paths under a folder that does not exist are looked for until it does (said once). */
  private lookForMissing(paths: ReadonlySet<string>): void {
    // Those whose folder appeared since the last look are watched first.
    this.found();
    const missing = new Set([...paths].filter((p) => !existsSync(dirname(p))));
    for (const p of missing)
      if (!this.missing.has(p)) this.log.info({ path: p }, 'not there yet, nor its folder: watched as soon as its folder appears (looked for every second)');
    this.missing = missing;
    if (missing.size === 0 || this.poll) return;
    this.poll = setInterval(() => this.found(), MISSING_MS);
    this.poll.unref();
  }

  /** A folder appeared: its path is watched from now, and what is already in it reloaded (once
   *  the watch is in place). */
  private found(): void {
    for (const p of this.missing) {
      if (this.closed || !this.watcher || !this.watched.has(p) || !existsSync(dirname(p))) continue;
      this.missing.delete(p);
      const watcher = this.watcher;
      watcher.unwatch(p);
      watcher.add(p);
      this.log.info({ path: p }, 'watching it now that its folder is there');
      // Reloaded once it is watched: an edit made after the reload is seen too.
      void this.settled(watcher, [p]).then(() => existsSync(p) && this.changed());
    }
    if (this.missing.size === 0 && this.poll) {
      clearInterval(this.poll);
      this.poll = null;
    }
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
    this.missing.clear();
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
    if (this.poll) clearInterval(this.poll);
    await this.watcher?.close();
    await this.running;
  }
}
