// What the translate step (plugins/translate.ts) needs of an API it serves over chat-completions
// engines: per endpoint, whether the engine speaks the API itself (then the request goes to it
// natively, nearly as it came) or is translated to; once per request, the checks and settings a
// translation needs; per attempt, the chat-completions body; per reply, the plan that turns the
// chat reply into the API's. apis/msgapi/translator.ts and apis/responses/translator.ts are the two.
import type { Context, Endpoint, ReplyHeaders, ReplyPlan } from '../../engine/api.js';
import type { ReplyOptions } from './chat-reply-plan.js';

export type Mode = 'passthrough' | 'translation';
/** Why an endpoint is translated to: its engine cannot take the API, or passthrough is off. */
export type Fallback = 'cannot' | 'translator';

export type Way = { mode: 'passthrough'; path: string } | { mode: 'translation'; fallback: Fallback };

export interface ApiTranslator<P extends ReplyOptions = ReplyOptions> {
  /** How this endpoint is spoken to: natively at a path of its engine, or translated. */
  way(ep: Endpoint): Way;
  /** The body sent natively (the original bytes, or nearly). */
  nativeBody(ctx: Context, ep: Endpoint): Buffer | null;
  /** The plan for a native reply. */
  nativeReply(status: number, headers: ReplyHeaders): ReplyPlan;
  /** Before the first translated attempt: checks (throw a 400 naming the field) and what the
   *  attempts and the reply share. */
  prepare(ctx: Context, reply: ReplyOptions): P;
  /** The chat-completions body for one endpoint; what it drops is named in `dropped` when given. */
  chatBody(ctx: Context, ep: Endpoint, model: string | undefined, p: P, dropped: string[] | undefined): Record<string, unknown>;
  /** The plan that turns a chat-completions reply into the API's. */
  reply(p: P, status: number, headers: ReplyHeaders): ReplyPlan;
  /** Client headers of the API that mean nothing to a chat-completions backend. */
  omitClientHeader?(name: string): boolean;
}
