// The usage ledger kept on disk (auth.usage_file), so that what the keys used and their budgets
// survive a restart without any server: read once at start, written (a temporary file renamed
// over the old one: never half a file) at most once a second while it changes, and on a clean
// stop. A crash loses at most the last second. A file that cannot be read is set aside and the
// ledger starts from zero; one that cannot be written is reported, the ledger kept in memory.
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import type { Logger } from 'pino';
import type { LedgerSnapshot, UsageLedger } from './usage-ledger.js';

const EVERY_MS = 1_000;
const WARN_EVERY_MS = 60_000;

/** Where the ledger is kept when auth.usage_file is not set: the user's state directory (XDG),
 *  one file per port (two gateways on one machine keep apart). */
export function defaultUsageFile(port: number, env: NodeJS.ProcessEnv = process.env): string {
  const state = env.XDG_STATE_HOME || join(homedir(), '.local', 'state');
  return join(state, 'inference-gateway', `usage-${port}.json`);
}

export class UsageFile {
  private readonly timer: NodeJS.Timeout;
  private lastWarning = 0;

  constructor(
    private readonly ledger: UsageLedger,
    public path: string,
    private readonly log: Logger,
  ) {
    this.load();
    this.timer = setInterval(() => this.save(), EVERY_MS);
    this.timer.unref();
  }

  private load(): void {
    if (!existsSync(this.path)) return;
    try {
      const saved = JSON.parse(readFileSync(this.path, 'utf8')) as LedgerSnapshot;
      if (saved?.version !== 1 || typeof saved.books !== 'object' || typeof saved.usage !== 'object')
        throw new Error('not a usage file of this gateway (version 1)');
      this.ledger.restore(saved);
    } catch (err) {
      const aside = `${this.path}.unreadable-${Date.now()}`;
      try {
        renameSync(this.path, aside);
      } catch {
        // Not even that: it is overwritten by the first save.
      }
      this.log.warn({ file: this.path, error: (err as Error).message, kept: aside }, 'usage file unreadable: usage and budgets start from zero');
    }
  }

  /** Written now if anything changed. */
  save(): void {
    if (!this.ledger.dirty) return;
    const snapshot = this.ledger.snapshot();
    const tmp = `${this.path}.${process.pid}.tmp`;
    try {
      mkdirSync(dirname(this.path), { recursive: true });
      writeFileSync(tmp, JSON.stringify(snapshot));
      renameSync(tmp, this.path);
    } catch (err) {
      this.ledger.dirty = true;
      const now = Date.now();
      if (now - this.lastWarning < WARN_EVERY_MS) return;
      this.lastWarning = now;
      this.log.warn({ file: this.path, error: (err as Error).message }, 'cannot write the usage file (auth.usage_file): usage is kept in memory only');
    }
  }

  close(): void {
    clearInterval(this.timer);
    this.save();
  }
}
