// No circles: the relative imports of the product (functions/, shared/, web/),
// type-only ones included, form no cycle, so each file can be read (and
// changed) after the files it builds on; nor do its folders (shared/sql/
// and shared/hubspot/ are two folders, shared/ itself a third), so each folder
// can be read after the folders it builds on. The orchestrator's routes share
// their types through a leaf (functions/orchestrator/deps.ts) as the worker's
// share runtime.ts; a type two folders share lives in a leaf in the lower one
// (shared/rate-limit-headers.ts, shared/stop-reason.ts).
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

/** The folder graph: an edge from a file's folder to each folder it imports from (its own folder left out). */
function folderGraph(files: Map<string, string[]>): Map<string, string[]> {
  const graph = new Map<string, Set<string>>();
  for (const [file, targets] of files) {
    const from = path.posix.dirname(file);
    const edges = graph.get(from) ?? new Set<string>();
    graph.set(from, edges);
    for (const t of targets) if (path.posix.dirname(t) !== from) edges.add(path.posix.dirname(t));
  }
  return new Map([...graph].map(([k, v]) => [k, [...v].sort()]));
}

/** A folder cycle with, for each step, one import that makes it. */
function explained(cycle: string[], files: Map<string, string[]>): string {
  return cycle.slice(1).map((to, i) => {
    const from = cycle[i]!;
    const [file, target] = [...files].flatMap(([f, ts]) => ts.map((t) => [f, t] as const))
      .find(([f, t]) => path.posix.dirname(f) === from && path.posix.dirname(t) === to)!;
    return `${from}/ → ${to}/ (${file} imports ${target})`;
  }).join('; ');
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

  it('finds a cycle between folders when no file cycle makes it', () => {
    // shared/sql/budget.ts once imported a type of shared/hubspot/transport.ts, while
    // shared/hubspot/ imported shared/sql/: no file cycle, a folder cycle.
    const files = new Map([
      ['shared/sql/budget.ts', ['shared/db.ts', 'shared/hubspot/transport.ts']],
      ['shared/hubspot/transport.ts', ['shared/redact.ts']],
      ['shared/hubspot/tokens.ts', ['shared/sql/credentials.ts']],
      ['shared/sql/credentials.ts', ['shared/db.ts']],
      ['shared/db.ts', []],
      ['shared/redact.ts', []],
    ]);
    expect(cycles(files)).toEqual([]);
    const folders = folderGraph(files);
    expect(folders.get('shared/sql')).toEqual(['shared', 'shared/hubspot']);
    expect(cycles(folders).map((c) => explained(c, files))).toEqual([
      'shared/hubspot/ → shared/sql/ (shared/hubspot/tokens.ts imports shared/sql/credentials.ts); '
        + 'shared/sql/ → shared/hubspot/ (shared/sql/budget.ts imports shared/hubspot/transport.ts)',
    ]);
    files.set('shared/sql/budget.ts', ['shared/db.ts', 'shared/rate-limit-headers.ts']);
    expect(cycles(folderGraph(files))).toEqual([]);
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

  it('nor do their folders: no folder imports one that imports it back', () => {
    const files = productFiles();
    const graph = new Map(files.map((f) => [f, relativeImports(f, readSource(f)).filter((t) => files.includes(t))]));
    const folders = folderGraph(graph);
    expect(cycles(folders).map((c) => explained(c, graph))).toEqual([]);
  });
});
