// Watching what a reload reads (chokidar): a burst of changes (an editor's save, a folder
// copied in) becomes one reload once it settles, and reloads never overlap — a change during
// one schedules one more after it.
import { watch, type FSWatcher } from 'chokidar';
import type { Logger } from 'pino';

const SETTLE_MS = 100;

export class Reloader {
  private watcher: FSWatcher | null = null;
  private watched = '';
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private again = false;
  private closed = false;

  constructor(private readonly reload: (reason: string) => Promise<unknown>, private readonly log: Logger) {}

  /** Watch these paths (files or folders, existing or not yet); the same list is a no-op. */
  watch(paths: readonly string[]): void {
    const key = [...new Set(paths)].sort().join('\n');
    if (this.closed || key === this.watched) return;
    this.watched = key;
    void this.watcher?.close();
    this.watcher = watch([...new Set(paths)], { ignoreInitial: true });
    this.watcher.on('all', () => this.changed());
    this.watcher.on('error', (err) => this.log.warn({ err }, 'watching for configuration changes failed'));
  }

  private changed(): void {
    if (this.closed) return;
    if (this.timer) this.timer.refresh();
    else this.timer = setTimeout(() => {
      this.timer = null;
      void this.trigger('file change');
    }, SETTLE_MS);
  }

  /** Reload now, or once more after the reload under way. */
  trigger(reason: string): Promise<void> {
    if (this.running) {
      this.again = true;
      return this.running;
    }
    this.running = (async () => {
      do {
        this.again = false;
        await this.reload(reason);
      } while (this.again && !this.closed);
      this.running = null;
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
