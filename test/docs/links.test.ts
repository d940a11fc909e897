// Every relative link in README.md and docs/**/*.md leads somewhere: the file or folder exists, and
// an #anchor (in the same page or another .md) names one of the target's headings by GitHub's slug.
// External links (http:, https:, mailto:) are not fetched.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** README.md and every Markdown file under docs/, relative to the root. */
function pages(): string[] {
  const found = ['README.md'];
  const walk = (dir: string) => {
    for (const name of readdirSync(join(ROOT, dir)).sort()) {
      const path = join(dir, name);
      if (statSync(join(ROOT, path)).isDirectory()) walk(path);
      else if (name.endsWith('.md')) found.push(path);
    }
  };
  walk('docs');
  return found;
}

/** The page's lines outside fenced code blocks, with their line numbers. */
function prose(markdown: string): { line: number; text: string }[] {
  const out: { line: number; text: string }[] = [];
  let fence: string | null = null;
  markdown.split('\n').forEach((text, i) => {
    const marker = /^\s*(`{3,}|~{3,})/.exec(text)?.[1];
    if (marker && (fence === null || marker.startsWith(fence))) fence = fence === null ? marker : null;
    else if (fence === null) out.push({ line: i + 1, text });
  });
  return out;
}

/** GitHub's anchor for a heading: its text lower-cased, punctuation other than - and _ removed,
 *  spaces to -. */
function slug(heading: string): string {
  const text = heading
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/`/g, '')
    .replace(/<[^>]+>/g, '')
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&amp;/g, '&');
  return text
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

/** The anchors of a page: its headings' slugs (a repeated one gets -1, -2…) and explicit ids. */
function anchors(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const { text } of prose(markdown)) {
    const heading = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(text)?.[1];
    if (heading !== undefined) {
      const base = slug(heading);
      const n = seen.get(base) ?? 0;
      seen.set(base, n + 1);
      out.add(n === 0 ? base : `${base}-${n}`);
    }
    for (const m of text.matchAll(/<a\s+(?:id|name)="([^"]+)"/g)) out.add(m[1]);
  }
  return out;
}

/** The page's Markdown links outside code: [text](target). */
function links(markdown: string): { line: number; target: string }[] {
  const out: { line: number; target: string }[] = [];
  for (const { line, text } of prose(markdown)) {
    const plain = text.replace(/(`+)[\s\S]*?\1/g, '');
    for (const m of plain.matchAll(/\[(?:[^\][]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) out.push({ line, target: m[1] });
  }
  return out;
}

/** What is wrong with each relative link of a page, one line each. */
function broken(page: string): string[] {
  const problems: string[] = [];
  const source = readFileSync(join(ROOT, page), 'utf8');
  for (const { line, target } of links(source)) {
    if (/^[a-z][a-z0-9+.-]*:/i.test(target) || target.startsWith('//')) continue;
    const hash = target.indexOf('#');
    const path = decodeURI(hash < 0 ? target : target.slice(0, hash));
    const anchor = hash < 0 ? null : decodeURIComponent(target.slice(hash + 1));
    const file = path === '' ? join(ROOT, page) : resolve(ROOT, dirname(page), path);
    const shown = relative(ROOT, file);
    if (!existsSync(file)) {
      problems.push(`${page}:${line}: ${target} — no such file: ${shown}`);
      continue;
    }
    if (anchor === null || !file.endsWith('.md')) continue;
    const names = anchors(readFileSync(file, 'utf8'));
    if (!names.has(anchor)) problems.push(`${page}:${line}: ${target} — ${shown} has no heading #${anchor}`);
  }
  return problems;
}

describe('doc links', () => {
  it('slugs headings as GitHub does', () => {
    expect(slug('Retries, fallback models and first-token deadlines')).toBe('retries-fallback-models-and-first-token-deadlines');
    expect(slug('Workers: gw serve --workers N (issue 22)')).toBe('workers-gw-serve---workers-n-issue-22');
    expect(slug('`server.rate_limits`')).toBe('serverrate_limits');
    expect(slug("Call one family's own API under its prefix")).toBe('call-one-familys-own-api-under-its-prefix');
    expect([...anchors('# A\n## A\n```\n## A\n```\n## A')]).toEqual(['a', 'a-1', 'a-2']);
  });

  it('finds the links of a page, not those in code', () => {
    expect(links('[a](x.md) `[b](y.md)` [`c`](z.md#q)\n```\n[d](w.md)\n```').map((l) => l.target)).toEqual(['x.md', 'z.md#q']);
  });

  it.each(pages())('%s: every relative link resolves, and every #anchor names a heading', (page) => {
    expect(broken(page), `broken links in ${page}`).toEqual([]);
  });
});
