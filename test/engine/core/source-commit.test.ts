import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { sourceCommit } from '../../../engine/core/source-commit.js';

const A = 'a'.repeat(40);
const B = 'b'.repeat(40);

function clone(files: Record<string, string>): string {
  const root = mkdtempSync(join(tmpdir(), 'gw-clone-'));
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(join(root, path, '..'), { recursive: true });
    writeFileSync(join(root, path), text);
  }
  return root;
}

describe('the commit a git clone runs from (build.commit without GW_BUILD_COMMIT)', () => {
  it('a branch: its loose ref, else its packed ref; a detached HEAD: the commit itself', () => {
    expect(sourceCommit(clone({ '.git/HEAD': 'ref: refs/heads/main\n', '.git/refs/heads/main': `${A}\n` }))).toBe(A);
    expect(
      sourceCommit(clone({ '.git/HEAD': 'ref: refs/heads/main\n', '.git/packed-refs': `# pack-refs\n${B} refs/heads/other\n${A} refs/heads/main\n` })),
    ).toBe(A);
    expect(sourceCommit(clone({ '.git/HEAD': `${B}\n` }))).toBe(B);
  });

  it("a worktree's .git file naming its folder", () => {
    const root = clone({ 'gitdir/HEAD': `${A}\n` });
    writeFileSync(join(root, '.git'), `gitdir: ${join(root, 'gitdir')}\n`);
    expect(sourceCommit(root)).toBe(A);
  });

  it('no clone, or one it cannot read: none', () => {
    expect(sourceCommit(clone({ 'package.json': '{}' }))).toBeUndefined();
    expect(sourceCommit(clone({ '.git/HEAD': 'ref: refs/heads/gone\n' }))).toBeUndefined();
  });
});
