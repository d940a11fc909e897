// A backend error on a translated Responses request, in the OpenAI error shape the Responses API
// shares with chat-completions: a body already in it goes as it came; any other becomes
// {error: {message, type, param, code}} with the backend's message inside.
import { backendErrorMessage } from '../backend-error.js';

export function errorReply(status: number, body: string): unknown {
  try {
    const j = JSON.parse(body);
    if (j?.error && typeof j.error === 'object' && typeof j.error.message === 'string') return j;
  } catch {
    // not JSON: wrapped below
  }
  return { error: { message: backendErrorMessage(status, body), type: status >= 500 ? 'server_error' : 'invalid_request_error', param: null, code: null } };
}
