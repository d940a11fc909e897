// Learned first-token deadlines (backends/first-tokens.ts), checked a few times a second by one
// timer for every stream held before its first content, instead of a timer each: a timer set and
// cleared costs a stream about 4k instructions, and a deadline of seconds needs no millisecond.
// A configured first_token_timeout keeps its own exact timer (deadline.ts).

/** How often the streams waiting for their first content are looked at. */
export const TICK_MS = 250;

/** A stream held before its first content: true when it needs no more looking at. */
export interface AwaitingFirstToken {
  late(now: number): boolean;
}

const waiting = new Set<AwaitingFirstToken>();
let timer: NodeJS.Timeout | null = null;

/** Look at this stream on every tick until it says it is done. */
export function watchFirstToken(s: AwaitingFirstToken): void {
  waiting.add(s);
  if (timer === null) {
    timer = setInterval(tick, TICK_MS);
    timer.unref();
  }
}

/** Done with it before the tick would find out (its first content came, it settled): not kept
 *  alive until then (a request's objects held a quarter of a second longer outlive the young
 *  generation, and cost the collector far more than this). */
export function unwatchFirstToken(s: AwaitingFirstToken): void {
  waiting.delete(s);
}

function tick(): void {
  const now = performance.now();
  for (const s of waiting) {
    // What it throws must not end the process (a timer's callback): it is done with.
    let done = true;
    try {
      done = s.late(now);
    } catch {}
    if (done) waiting.delete(s);
  }
  if (waiting.size === 0 && timer !== null) {
    clearInterval(timer);
    timer = null;
  }
}
