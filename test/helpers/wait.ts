// Waiting on a signal, never on a timing margin: poll a condition until it holds, within a
// budget generous enough for a loaded 2-core machine; fail naming what never happened.
export const BUDGET_MS = 30_000;

/** A promise a test releases by hand (a fake engine's holdUntil, say). */
export function gate(): { promise: Promise<void>; open(): void } {
  let open!: () => void;
  const promise = new Promise<void>((r) => (open = r));
  return { promise, open };
}

export async function waitFor<T>(probe: () => T | Promise<T>, what: string, budgetMs = BUDGET_MS): Promise<NonNullable<T>> {
  const deadline = Date.now() + budgetMs;
  for (;;) {
    const value = await probe();
    if (value) return value as NonNullable<T>;
    if (Date.now() > deadline) throw new Error(`waited ${budgetMs} ms for ${what}; it never happened`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
