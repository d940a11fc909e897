// A failed attempt's kind: its outcome without the detail in brackets ("503", "reset",
// "stream_broken_midway"…), the bounded word metrics label and traces type errors with.
export function outcomeKind(outcome: string): string {
  const cut = outcome.indexOf(' (');
  return cut < 0 ? outcome : outcome.slice(0, cut);
}
