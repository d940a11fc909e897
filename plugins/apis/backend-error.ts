// A backend's error body, read for the message a client of another API should see: the backend's
// own message where its body has one (`error.message`, `error`, `message`, `detail`), else its
// text, clipped. Both translators put it in their API's error shape.
const MAX_MESSAGE = 2000;

export function backendErrorMessage(status: number, body: string): string {
  let message = body.slice(0, MAX_MESSAGE) || `backend answered ${status}`;
  try {
    const j = JSON.parse(body);
    const e = j?.error;
    const found =
      typeof e === 'string'
        ? e
        : typeof e?.message === 'string'
          ? e.message
          : typeof j?.message === 'string'
            ? j.message
            : typeof j?.detail === 'string'
              ? j.detail
              : undefined;
    if (found) message = found.slice(0, MAX_MESSAGE);
  } catch {
    // not JSON: the text is the message
  }
  return message;
}
