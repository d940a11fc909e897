// The commit a gateway runs from when it runs from a git clone (no GW_BUILD_COMMIT set, as the
// container's build sets it): read from the clone's .git folder — HEAD, the ref it names, or the
// packed refs — without a git binary. Undefined anywhere else (an npm install, a copied folder).
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';

const SHA = /^[0-9a-f]{40}$/;

const read = (file: string): string | undefined => {
  try {
    return readFileSync(file, 'utf8').trim();
  } catch {
    return undefined;
  }
};

export function sourceCommit(root: string): string | undefined {
  let git = join(root, '.git');
  // A worktree's .git is a file naming the folder.
  const pointer = read(git);
  if (pointer?.startsWith('gitdir: ')) git = resolve(root, pointer.slice('gitdir: '.length));
  const head = read(join(git, 'HEAD'));
  if (head === undefined) return undefined;
  if (SHA.test(head)) return head;
  const ref = /^ref: (\S+)$/.exec(head)?.[1];
  if (!ref) return undefined;
  const loose = read(join(git, ref));
  if (loose && SHA.test(loose)) return loose;
  for (const line of (read(join(git, 'packed-refs')) ?? '').split('\n')) {
    const [sha, name] = line.split(' ');
    if (name === ref && SHA.test(sha)) return sha;
  }
  return undefined;
}
