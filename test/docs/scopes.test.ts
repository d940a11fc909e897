// The state scopes table of docs/architecture.md says what engine/backends/sharing/scopes.ts says,
// row for row, and every file it names exists: the one full list of what is kept where.
import { existsSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { STATE_SCOPES } from '../../engine/backends/sharing/scopes.js';

/** The rows of the first table after the heading `## State scopes`. */
function documented(): { fact: string; scope: string; where: string }[] {
  const doc = readFileSync('docs/architecture.md', 'utf8');
  const at = doc.indexOf('\n## State scopes\n');
  expect(at, 'docs/architecture.md needs a "## State scopes" section').toBeGreaterThan(0);
  const lines = doc.slice(at).split('\n');
  const start = lines.findIndex((l) => l.startsWith('| Fact |'));
  const rows: { fact: string; scope: string; where: string }[] = [];
  for (const line of lines.slice(start + 2)) {
    if (!line.startsWith('|')) break;
    const [fact, scope, where] = line.split(' | ').map((c) => c.replace(/^\| ?| ?\|$/g, '').trim());
    rows.push({ fact, scope, where: where.replaceAll('`', '') });
  }
  return rows;
}

describe('state scopes', () => {
  it('docs/architecture.md lists every fact of sharing/scopes.ts with its scope and files, in order', () => {
    expect(documented()).toEqual(STATE_SCOPES.map((f) => ({ fact: f.fact, scope: f.scope, where: f.where })));
  });

  it('every file the table names exists', () => {
    const missing = STATE_SCOPES.flatMap((f) => f.where.split(', ')).filter((path) => !existsSync(path));
    expect(missing, 'moved? update where: in engine/backends/sharing/scopes.ts and the table in docs/architecture.md').toEqual([]);
  });
});
