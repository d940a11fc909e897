// Which API a route's streams speak when they are continued, from the endpoint's profile
// (api.continuation.routes): the shared ContinuationApi of each kind. The attempt loop compares
// them by identity: only an endpoint whose route speaks the same API can continue an answer.
import type { ContinuationApi, ContinuationKind, Profile } from '../../../engine/api.js';
import { MESSAGES } from './messages.js';
import { LLAMA_COMPLETION, OLLAMA_CHAT, OLLAMA_GENERATE } from './native.js';
import { CHAT, COMPLETIONS } from './openai.js';

export { continued, type Continued } from './requests.js';
export type { AnswerText } from './answer.js';

const APIS: Record<ContinuationKind, ContinuationApi> = {
  chat: CHAT,
  completions: COMPLETIONS,
  messages: MESSAGES,
  ollama_chat: OLLAMA_CHAT,
  ollama_generate: OLLAMA_GENERATE,
  llama_completion: LLAMA_COMPLETION,
};

/** The kind a profile declares for a route path, or undefined: it cannot be continued. */
export function continuationKind(profile: Profile, path: string): ContinuationKind | undefined {
  return profile.api.continuation.routes[path];
}

export function continuationApi(kind: ContinuationKind | undefined): ContinuationApi | null {
  return kind ? APIS[kind] : null;
}
