// Chat completions and completions streams (`choices[0].delta` / `choices[0].text`): the answer
// so far, and a continuation's chunks under the id the client saw. Before its first words, a
// continuation's chunks (the role delta, empty content) are dropped; usage is summed where the
// backend reported tokens before the break, else marked partial (`gw_partial: true`).
import type { ContinuationApi, StreamEvent } from '../../../engine/api.js';
import { AnswerText, filled, json, withData } from './answer.js';

class ChoicesAnswer extends AnswerText {
  id: unknown;
  created: unknown;

  constructor(private readonly textOf: (choice: any) => unknown) {
    super();
  }

  read(ev: StreamEvent): void {
    const v = json(ev);
    if (typeof v !== 'object' || v === null) return;
    if (this.id === undefined && v.id !== undefined) {
      this.id = v.id;
      this.created = v.created;
    }
    if (typeof v.usage?.completion_tokens === 'number') this.reportedTokens = v.usage.completion_tokens;
    const choices = v.choices;
    if (!Array.isArray(choices)) return;
    if (choices.length > 1 || choices.some((c: any) => c?.index !== undefined && c.index !== 0)) return this.block('it has several choices (n > 1)');
    const c = choices[0];
    if (!c) return;
    const d = c.delta ?? c.message ?? {};
    if (filled(d.tool_calls) || filled(d.function_call)) this.block('it broke inside a tool call');
    if (filled(d.reasoning_content) || filled(d.reasoning)) {
      if (this.text !== '') this.block('it went back to reasoning after its answer began');
      this.reasoning = true;
    }
    this.addText(this.textOf(c));
  }

  splicer(restart = false): (ev: StreamEvent) => StreamEvent[] | null {
    const join = this.joiner(restart);
    let started = false;
    return (ev) => {
      const v = json(ev);
      if (typeof v !== 'object' || v === null || !Array.isArray(v.choices)) return [ev]; // [DONE], errors
      if (this.id !== undefined) v.id = this.id;
      if (this.created !== undefined) v.created = this.created;
      // A restart's usage is the whole answer's already.
      if (!restart && v.usage && typeof v.usage === 'object') {
        if (this.reportedTokens !== undefined && typeof v.usage.completion_tokens === 'number') {
          v.usage.completion_tokens += this.reportedTokens;
          if (typeof v.usage.total_tokens === 'number') v.usage.total_tokens += this.reportedTokens;
        } else v.usage.gw_partial = true;
      }
      const c = v.choices[0];
      if (!c) return [withData(ev, v)];
      const d = c.delta;
      const piece = this.textOf(c);
      // A restart's end before it has passed the client's text would finish a shorter answer.
      const ends = (filled(c.finish_reason) || filled(d?.tool_calls)) && join.endsMayPass();
      if (typeof piece === 'string' && piece !== '') {
        if (d) delete d.role;
        const rest = join.next(piece);
        if (rest === null) return null;
        if (rest === '' && !ends) return [];
        if (d) d.content = rest;
        else c.text = rest;
        started = true;
      } else if (!started && !ends) return []; // its opening (a role delta, empty content): the client's already
      return [withData(ev, v)];
    };
  }
}

export const CHAT: ContinuationApi = { name: 'chat', transcript: () => new ChoicesAnswer((c) => (c.delta ?? c.message)?.content) };
export const COMPLETIONS: ContinuationApi = { name: 'completions', transcript: () => new ChoicesAnswer((c) => c.text) };
