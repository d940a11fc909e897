// One timer for an attempt's next deadline (its first content, the request's budget): set again
// as the attempt moves on, cleared when it settles. What its callback throws never escapes the
// timer (a throw there would end the process): it goes to `failed`. And the per-request
// first-token deadline a client may set.
import { parseDuration } from '../core/duration.js';
import { gwError } from '../core/errors.js';
import type { Exchange } from './exchange.js';
export class Deadline {
  private timer: NodeJS.Timeout | null = null;
  /** What it was set for (performance.now() time): a timer may fire a fraction of a millisecond early. */
  at = 0;

  constructor(
    private readonly due: () => void,
    private readonly failed: (err: unknown) => void,
  ) {}

  get armed(): boolean {
    return this.timer !== null;
  }

  set(at: number): void {
    this.clear();
    this.at = at;
    this.timer = setTimeout(
      () => {
        this.timer = null;
        try {
          this.due();
        } catch (err) {
          this.failed(err);
        }
      },
      Math.max(0, at - performance.now()),
    );
  }

  clear(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }
}

const FIRST_TOKEN_HEADER = 'x-gw-first-token-timeout';

/** The per-request first-token deadline (X-Gw-First-Token-Timeout), or undefined. */
export function firstTokenOverride(ex: Pick<Exchange, 'header'>): number | undefined {
  const value = ex.header(FIRST_TOKEN_HEADER);
  if (value === undefined) return undefined;
  try {
    return parseDuration(value.trim());
  } catch {
    throw gwError('BAD_REQUEST', { reason: `the ${FIRST_TOKEN_HEADER} header must be a duration such as 10s or 500ms` });
  }
}
