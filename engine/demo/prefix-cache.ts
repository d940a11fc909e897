// A fake engine's prefix cache: the token sequences it served lately (prompt and reply), so a
// request that repeats one's beginning (a conversation's next turn) skips evaluating that part, as
// llama.cpp's slot and prompt caches, vLLM's and SGLang's prefix caches do. There is no tokenizer:
// 4 characters count as 1 token, over the prompt text of prompt-text.ts. Bounded in tokens, least
// recently used out first.

export const CHARS_PER_TOKEN = 4;
export const tokensOf = (text: string): number => Math.ceil(text.length / CHARS_PER_TOKEN);

/** A request's prompt: the tokens found in the cache and those evaluated. */
export interface Prefill {
  cached: number;
  evaluated: number;
}

/** Compared a block at a time first: a conversation's turns share tens of kilobytes. */
const BLOCK = 256;

function commonPrefix(a: string, b: string): number {
  const max = Math.min(a.length, b.length);
  let n = 0;
  while (n + BLOCK <= max && a.startsWith(b.slice(n, n + BLOCK), n)) n += BLOCK;
  while (n < max && a.charCodeAt(n) === b.charCodeAt(n)) n++;
  return n;
}

export class PrefixCache {
  /** Sequence → its tokens, the least recently used first. */
  private readonly seqs = new Map<string, number>();
  private used = 0;

  constructor(readonly capacity = 256 * 1024) {}

  /** Tokens held now. */
  get tokens(): number {
    return this.used;
  }

  /** The longest prefix of `text` any cached sequence shares, in whole tokens; at least one token
   *  is left to evaluate (an engine needs the last one's logits). The sequence matched becomes recent. */
  lookup(text: string): Prefill {
    let best = 0;
    let match: string | undefined;
    for (const seq of this.seqs.keys()) {
      const n = commonPrefix(text, seq);
      if (n > best) [best, match] = [n, seq];
    }
    if (match !== undefined) this.touch(match);
    const total = tokensOf(text);
    const cached = Math.min(Math.floor(best / CHARS_PER_TOKEN), Math.max(0, total - 1));
    return { cached, evaluated: total - cached };
  }

  /** Remember a served sequence. Those it extends go: the conversation's state moved on. One
   *  longer than the whole cache is not kept. */
  add(text: string): void {
    const n = tokensOf(text);
    if (n > this.capacity) return;
    for (const [seq, t] of this.seqs) if (text.startsWith(seq)) this.drop(seq, t);
    this.seqs.set(text, n);
    this.used += n;
    for (const [seq, t] of this.seqs) {
      if (this.used <= this.capacity) break;
      this.drop(seq, t);
    }
  }

  clear(): void {
    this.seqs.clear();
    this.used = 0;
  }

  private touch(seq: string): void {
    const t = this.seqs.get(seq)!;
    this.seqs.delete(seq);
    this.seqs.set(seq, t);
  }

  private drop(seq: string, t: number): void {
    this.seqs.delete(seq);
    this.used -= t;
  }
}
