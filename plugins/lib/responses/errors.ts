// A backend error on a translated Responses request, in the OpenAI error shape the Responses API
// shares with chat-completions: a body already in it goes as it came; any other becomes
// {error: {message, type, param, code}} with the backend's message inside (clipped).
const MAX_MESSAGE = 2000;

export function errorReply(status: number, body: string): unknown {
  let message = body.slice(0, MAX_MESSAGE) || `backend answered ${status}`;
  try {
    const j = JSON.parse(body);
    const e = j?.error;
    if (e && typeof e === 'object' && typeof e.message === 'string') return j;
    const found = typeof e === 'string' ? e : typeof j?.message === 'string' ? j.message : typeof j?.detail === 'string' ? j.detail : undefined;
    if (found) message = found.slice(0, MAX_MESSAGE);
  } catch {
    // not JSON: the text is the message
  }
  return { error: { message, type: status >= 500 ? 'server_error' : 'invalid_request_error', param: null, code: null } };
}
