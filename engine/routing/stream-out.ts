// A watched stream on its way to the client, whole events only: the bytes of an event not
// finished yet wait for its end (held, never copied unless split), so a stream that breaks
// leaves the client at an event's boundary, where an error event of ours or another backend's
// continuation can follow. Backends send whole events per chunk almost always: then each chunk
// goes out as it came, with no copy.
export class StreamOut {
  private pending: Buffer[] = [];
  private pendingBytes = 0;
  /** Offset into the stream up to which bytes were taken (passed on or dropped). */
  private takenTo = 0;

  add(chunk: Buffer): void {
    this.pending.push(chunk);
    this.pendingBytes += chunk.length;
  }

  /** Bytes waiting now. */
  get waiting(): number {
    return this.pendingBytes;
  }

  /** The bytes up to offset `to` of the stream (those after it keep waiting); null: none. */
  take(to: number): Buffer | null {
    const n = to - this.takenTo;
    if (n <= 0) return null;
    this.takenTo = to;
    const p = this.pending;
    if (p.length === 1 && p[0].length === n) {
      const whole = p[0];
      p.length = 0;
      this.pendingBytes = 0;
      return whole;
    }
    const all = p.length === 1 ? p[0] : Buffer.concat(p, this.pendingBytes);
    const rest = all.subarray(n);
    this.pending = rest.length > 0 ? [rest] : [];
    this.pendingBytes = rest.length;
    return all.subarray(0, n);
  }

  /** Everything waiting. */
  takeAll(): Buffer | null {
    return this.take(this.takenTo + this.pendingBytes);
  }
}
