// The product's source files (functions/, shared/, web/) as text, for the
// structure tests: where SQL lives, imports without cycles, file sizes.
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { PROJECT_ROOT } from '../../local/postgres.ts';

export const PRODUCT_DIRS = ['functions', 'shared', 'web'] as const;

/** Every .ts and .js file under the product directories, relative to the project root (posix separators). */
export function productFiles(root = PROJECT_ROOT): string[] {
  const out: string[] = [];
  const walk = (dir: string) => {
    for (const entry of readdirSync(path.join(root, dir), { withFileTypes: true })) {
      const rel = path.posix.join(dir, entry.name);
      if (entry.isDirectory()) walk(rel);
      else if (/\.(ts|js)$/.test(entry.name)) out.push(rel);
    }
  };
  for (const dir of PRODUCT_DIRS) walk(dir);
  return out.sort();
}

export function readSource(rel: string, root = PROJECT_ROOT): string {
  return readFileSync(path.join(root, rel), 'utf8');
}

/** The code without its comments (block comments and whole-line // comments). */
export function withoutComments(source: string): string {
  return source.replace(/\/\*[\s\S]*?\*\//g, '').replace(/^\s*\/\/.*$/gm, '');
}
