// The messages API's streams: the answer so far is the text of its text blocks; a continuation
// (the API's own prefill: a trailing assistant turn) joins the client's open text block — its
// opening events (message_start, ping, the first content_block_start) dropped, its block
// indexes moved onto the client's. A block the client saw closed is followed by the
// continuation's as a new block. message_delta's usage is marked partial (`gw_partial: true`):
// the broken part reported no output count.
import type { ContinuationApi, StreamEvent } from '../../../engine/api.js';
import { AnswerText, json, withData } from './answer.js';

class MessagesAnswer extends AnswerText {
  /** The last block the client saw begin, and whether it was closed. */
  private index = -1;
  private type = '';
  private closed = true;

  read(ev: StreamEvent): void {
    const v = json(ev);
    if (typeof v !== 'object' || v === null) return;
    const type = typeof v?.type === 'string' ? v.type : ev.name;
    if (type === 'content_block_start') {
      this.index = typeof v.index === 'number' ? v.index : this.index + 1;
      this.type = String(v.content_block?.type ?? '');
      this.closed = false;
      if (this.type.endsWith('tool_use')) this.block('it broke inside a tool call');
      if (this.type.includes('thinking')) {
        if (this.text !== '') this.block('it went back to reasoning after its answer began');
        this.reasoning = true;
      }
    } else if (type === 'content_block_stop') this.closed = true;
    else if (type === 'content_block_delta') {
      const d = v.delta ?? {};
      if (d.type === 'text_delta') this.addText(d.text);
      else if (d.type === 'input_json_delta') this.block('it broke inside a tool call');
    }
  }

  override blocker(): string | null {
    if (!this.closed && this.type !== 'text' && this.type !== '') return this.blocked ?? `it broke inside a ${this.type} block`;
    return super.blocker();
  }

  splicer(restart = false): (ev: StreamEvent) => StreamEvent[] | null {
    const join = this.joiner(restart);
    let shift: number | null = null;
    /** Blocks of the continuation before its first text (it thought again): not the answer's. */
    const before = new Set<number>();
    return (ev) => {
      const v = json(ev);
      if (typeof v !== 'object' || v === null) return [ev];
      const type = typeof v.type === 'string' ? v.type : ev.name;
      if (type === 'message_start' || type === 'ping') return [];
      // A restart joins only the client's open text block, and nothing of it goes out (a block's
      // start, the message's end) before its text has passed the client's.
      if (restart && (this.closed || this.type !== 'text')) return null;
      if (restart && !join.passed && type !== 'content_block_delta') return [];
      if (typeof v.index === 'number') {
        if (shift === null) {
          if (type === 'content_block_start' && v.content_block?.type !== 'text') before.add(v.index);
          if (before.has(v.index)) return [];
          // Its first text block: the client's open text block goes on; else a new block after it.
          const joins = !this.closed && this.type === 'text';
          shift = (joins ? this.index : this.index + 1) - v.index;
          if (joins && type === 'content_block_start') return [];
        } else if (before.has(v.index)) return [];
        v.index += shift;
      }
      if (type === 'content_block_delta' && v.delta?.type === 'text_delta') {
        const rest = join.next(String(v.delta.text ?? ''));
        if (rest === null) return null;
        v.delta.text = rest;
        if (rest === '') return [];
      }
      if (!restart && type === 'message_delta' && v.usage && typeof v.usage === 'object') v.usage.gw_partial = true;
      return [withData(ev, v)];
    };
  }
}

export const MESSAGES: ContinuationApi = { name: 'messages', transcript: () => new MessagesAnswer() };
