// The house's import rules, read from the sources: the engine's layers import only downwards
// (core → backends → routing → kernel → the public API and the demo engines), the engine never
// imports a plugin, and a plugin reaches the engine only through engine/api.ts, as a third-party
// plugin does.
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const ROOT = resolve('.');

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((d) => d.isFile() && d.name.endsWith('.ts') && !d.name.endsWith('.d.ts'))
    .map((d) => relative(ROOT, join(d.parentPath, d.name)));
}

/** The repository paths a file imports (static, dynamic with a literal, re-exports), relative ones only. */
function importsOf(file: string): string[] {
  const sf = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, true);
  const specs: string[] = [];
  const visit = (node: ts.Node): void => {
    if ((ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) && node.moduleSpecifier && ts.isStringLiteral(node.moduleSpecifier))
      specs.push(node.moduleSpecifier.text);
    else if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword && node.arguments[0] && ts.isStringLiteral(node.arguments[0]))
      specs.push(node.arguments[0].text);
    ts.forEachChild(node, visit);
  };
  visit(sf);
  return specs.filter((s) => s.startsWith('.')).map((s) => relative(ROOT, resolve(dirname(file), s)).replace(/\.js$/, '.ts'));
}

const LAYERS = ['engine/core/', 'engine/backends/', 'engine/routing/', 'engine/kernel/'] as const;
/** A file's layer: its index in LAYERS; the public API and the demo engines sit above them all. */
const layerOf = (path: string): number =>
  path === 'engine/api.ts' || path.startsWith('engine/demo/') ? LAYERS.length : LAYERS.findIndex((l) => path.startsWith(l));

describe('import rules', () => {
  it('the engine: each layer imports only its own and the layers below, never a plugin', () => {
    const wrong: string[] = [];
    for (const file of sources('engine')) {
      const own = layerOf(file);
      expect(own, `${file} is in no layer: put it in one of ${LAYERS.join(', ')}`).toBeGreaterThanOrEqual(0);
      for (const target of importsOf(file)) {
        if (target.startsWith('plugins/')) wrong.push(`${file} imports ${target} (the engine never knows a plugin)`);
        else if (target.startsWith('engine/') && layerOf(target) > own) wrong.push(`${file} imports ${target}, a layer above it`);
      }
    }
    expect(wrong).toEqual([]);
  });

  it('the plugins: the engine only through engine/api.ts', () => {
    const wrong: string[] = [];
    for (const file of sources('plugins')) {
      for (const target of importsOf(file)) {
        if (target.startsWith('engine/') && target !== 'engine/api.ts')
          wrong.push(`${file} imports ${target}: take it from engine/api.ts (add it there if a plugin needs it)`);
        else if (!target.startsWith('engine/') && !target.startsWith('plugins/') && !target.startsWith('node_modules/'))
          wrong.push(`${file} imports ${target}, outside the engine's API and the plugins`);
      }
    }
    expect(wrong).toEqual([]);
  });

  it('a step cannot write what the kernel owns (the Context type makes those fields read-only)', () => {
    const file = 'test/fixtures/types/kernel-owned.ts';
    const program = ts.createProgram([file], {
      strict: true,
      noEmit: true,
      module: ts.ModuleKind.NodeNext,
      moduleResolution: ts.ModuleResolutionKind.NodeNext,
      target: ts.ScriptTarget.ES2022,
      skipLibCheck: true,
      types: ['node'],
    });
    const errors = ts
      .getPreEmitDiagnostics(program)
      .filter((d) => d.file?.fileName.endsWith(file))
      .map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n'));
    // One error per line of the fixture that writes a kernel-owned field, none elsewhere.
    expect(errors).toHaveLength(6);
    for (const e of errors)
      expect(e).toMatch(/Cannot assign to '(status|responseStarted|error|errorAnswered|headMs|totalMs)' because it is a read-only property/);
  });
});
