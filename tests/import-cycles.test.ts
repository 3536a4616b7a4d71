// No circles: the relative imports of the product (functions/, shared/, web/),
// type-only ones included, form no cycle, so each file can be read (and
// changed) after the files it builds on. The orchestrator's routes share
// their types through a leaf (functions/orchestrator/deps.ts) as the worker's
// share runtime.ts.
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { productFiles, readSource, withoutComments } from './support/source-files.ts';

/** The relative imports (and re-exports) of a file, resolved to project-relative paths. */
function relativeImports(file: string, source: string): string[] {
  const specifiers = [...withoutComments(source).matchAll(/(?:^|[\s;])(?:import|export)\s[^;]*?from\s*['"](\.[^'"]+)['"]|import\s*\(\s*['"](\.[^'"]+)['"]\s*\)|^\s*import\s+['"](\.[^'"]+)['"]/gm)]
    .map((m) => m[1] ?? m[2] ?? m[3]!);
  return specifiers.map((s) => path.posix.normalize(path.posix.join(path.posix.dirname(file), s)));
}

/** Every cycle of the graph, each as the files around it (found by depth-first search, one per back edge). */
function cycles(graph: Map<string, string[]>): string[][] {
  const found: string[][] = [];
  const state = new Map<string, 'open' | 'done'>();
  const stack: string[] = [];
  const visit = (node: string) => {
    state.set(node, 'open');
    stack.push(node);
    for (const next of graph.get(node) ?? []) {
      if (state.get(next) === 'open') found.push([...stack.slice(stack.indexOf(next)), next]);
      else if (!state.has(next)) visit(next);
    }
    stack.pop();
    state.set(node, 'done');
  };
  for (const node of [...graph.keys()].sort()) if (!state.has(node)) visit(node);
  return found;
}

describe('imports', () => {
  it('finds a cycle when there is one, type-only imports included', () => {
    const a = relativeImports('functions/x/a.ts', "import type { B } from './b.ts';\nimport { c } from '../../shared/c.ts';");
    expect(a).toEqual(['functions/x/b.ts', 'shared/c.ts']);
    expect(relativeImports('web/app.js', "import { api } from './api-client.js';\nexport { chart } from './charts.js';")).toEqual(['web/api-client.js', 'web/charts.js']);
    const graph = new Map([['a', ['b']], ['b', ['c']], ['c', ['a']], ['d', ['a']]]);
    expect(cycles(graph)).toEqual([['a', 'b', 'c', 'a']]);
    expect(cycles(new Map([['a', ['b']], ['b', []]]))).toEqual([]);
  });

  it('the orchestrator imports no worker file, shared/ no function file', () => {
    const crossing = productFiles().flatMap((f) => relativeImports(f, readSource(f))
      .filter((t) => (f.startsWith('functions/orchestrator/') && t.startsWith('functions/worker/')) || (f.startsWith('shared/') && t.startsWith('functions/')))
      .map((t) => `${f} → ${t}`));
    expect(crossing).toEqual([]);
  });

  it('the relative imports of functions/, shared/ and web/ form no cycle', () => {
    const files = productFiles();
    const graph = new Map(files.map((f) => [f, relativeImports(f, readSource(f)).filter((t) => files.includes(t))]));
    expect(cycles(graph).map((c) => c.join(' → '))).toEqual([]);
  });
});
