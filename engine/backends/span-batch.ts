// Ended spans wait here for their batch, as the UTF-8 bytes of their OTLP/JSON text
// (otlp-json.ts) written one after another into one buffer: memory the garbage collector does not
// walk, and the export's body without another copy of each span. A batch leaves when it holds
// MAX_SPANS spans or MAX_BYTES, or `delayMs` after its first span, never from the request that
// ended them. A collector that does not keep up loses spans, not memory: while MAX_SENDING
// exports are under way, a full batch is dropped and counted. What is lost is said in the log at
// most once a minute (a collector down or refusing the key is seen, not guessed).

import type { SpanText } from './otlp-json.js';

/** Spans in one export (the SDK's default batch size), and its bytes at most. */
const MAX_SPANS = 512;
const MAX_BYTES = 1 << 20;
/** Exports under way at once (each ends within the transport's timeout). */
const MAX_SENDING = 4;
const WARN_EVERY_MS = 60_000;
const COMMA = 0x2c;

/** One export's spans: their JSON texts, comma-separated, as UTF-8. */
export interface Batch {
  bytes: Buffer;
  count: number;
}

export class SpanBatch {
  private buf = Buffer.allocUnsafe(64 * 1024);
  private used = 0;
  private count = 0;
  private timer: NodeJS.Timeout | null = null;
  private readonly sending = new Set<Promise<void>>();
  private lostSince = 0;
  private lastWarned = -Infinity;

  constructor(
    private readonly send: (batch: Batch) => Promise<void>,
    private readonly delayMs: number,
    private readonly warn: (spans: number, why: string | undefined) => void,
  ) {}

  /** An ended span's JSON text joins the batch. */
  readonly add = (span: SpanText): void => {
    const json = span.text;
    // Three bytes a UTF-16 unit at most, and the comma.
    const room = json.length * 3 + 1;
    if (this.count > 0 && this.used + room > MAX_BYTES) this.flush();
    if (this.used + room > this.buf.length) this.grow(this.used + room);
    if (this.count > 0) this.buf[this.used++] = COMMA;
    // ASCII is copied as it is (latin1: one byte a character); anything else is encoded.
    this.used += this.buf.write(json, this.used, span.ascii ? 'latin1' : 'utf8');
    if (++this.count >= MAX_SPANS) this.flush();
    else if (this.timer === null) {
      this.timer = setTimeout(this.flush, this.delayMs);
      this.timer.unref();
    }
  };

  private grow(need: number): void {
    const next = Buffer.allocUnsafe(Math.max(need, this.buf.length * 2));
    this.buf.copy(next, 0, 0, this.used);
    this.buf = next;
  }

  /** Send what is held. */
  readonly flush = (): void => {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    if (this.count === 0) return;
    const batch = { bytes: this.buf.subarray(0, this.used), count: this.count };
    // The bytes leave with the export: the next batch is written into a buffer of its own.
    this.buf = Buffer.allocUnsafe(this.buf.length);
    this.used = 0;
    this.count = 0;
    if (this.sending.size >= MAX_SENDING) return this.lost(batch.count, 'the collector does not keep up');
    const p = this.send(batch);
    this.sending.add(p);
    void p.finally(() => this.sending.delete(p));
  };

  /** `spans` were not delivered: counted, and said at most once a minute. */
  lost(spans: number, why: unknown): void {
    this.lostSince += spans;
    const now = performance.now();
    if (now - this.lastWarned < WARN_EVERY_MS) return;
    this.lastWarned = now;
    this.warn(this.lostSince, why instanceof Error ? why.message : why === undefined ? undefined : String(why));
    this.lostSince = 0;
  }

  /** Send what is held and wait for every export under way. */
  async stop(): Promise<void> {
    this.flush();
    await Promise.all([...this.sending]);
  }
}
