// How long a stream's first content usually takes on an endpoint, per model and prompt size: the
// attempt loop gives up a first token that takes far longer when a warm alternative waits (a
// learned first-token deadline, beside the configured one). Kept per process, like the p2c
// latency; only the last few times of each model and size count, so it follows a load that
// changes. A model too new to have times of its own takes the endpoint's, every model's together.

/** Times kept per model and prompt size, and how many make a deadline. */
const SAMPLES = 8;
const ENOUGH = 3;
/** The deadline: this many times the longest recent time, and never shorter than FLOOR_MS. */
const FACTOR = 4;
export const FLOOR_MS = 3_000;
/** Models remembered per endpoint (a name asked for once is not kept for ever). */
const MODELS = 256;

/** Prompt sizes by doubling: under 1 KiB, under 2 KiB, … */
const sizeClass = (bytes: number) => Math.min(20, 32 - Math.clz32(bytes >>> 10));

class Recent {
  readonly times: number[] = [];
  private next = 0;
  add(ms: number): void {
    if (this.times.length < SAMPLES) this.times.push(ms);
    else this.times[this.next] = ms;
    this.next = (this.next + 1) % SAMPLES;
  }
}

/** Recent times by prompt size class. */
type BySize = Map<number, Recent>;

function add(sizes: BySize, c: number, ms: number): void {
  let recent = sizes.get(c);
  if (recent === undefined) sizes.set(c, (recent = new Recent()));
  recent.add(ms);
}

export class FirstTokenTimes {
  private readonly byModel = new Map<string, BySize>();
  /** Every model's together. */
  private readonly all: BySize = new Map();

  /** A stream of `model` for a prompt of `promptBytes` had its first content after `ms`. */
  record(model: string, promptBytes: number, ms: number): void {
    let sizes = this.byModel.get(model);
    if (sizes === undefined) {
      if (this.byModel.size >= MODELS) this.byModel.delete(this.byModel.keys().next().value as string);
      this.byModel.set(model, (sizes = new Map()));
    }
    const c = sizeClass(promptBytes);
    add(sizes, c, ms);
    add(this.all, c, ms);
  }

  /** The first-token deadline learned for `model` and a prompt this size: FACTOR × the longest of
   *  its recent times (the endpoint's, when the model has too few), at least FLOOR_MS; 0 while too
   *  little is known. */
  deadline(model: string, promptBytes: number): number {
    const c = sizeClass(promptBytes);
    const mine = this.byModel.get(model)?.get(c)?.times;
    const times = mine !== undefined && mine.length >= ENOUGH ? mine : this.all.get(c)?.times;
    if (times === undefined || times.length < ENOUGH) return 0;
    let longest = 0;
    for (const t of times) if (t > longest) longest = t;
    return Math.max(FLOOR_MS, FACTOR * longest);
  }
}
