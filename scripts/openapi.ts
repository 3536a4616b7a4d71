// Writes openapi.json (the orchestrator's OpenAPI 3.1 document, generated from
// its zod schemas). `--check` writes nothing and exits 1 when the file differs.
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { openApiDocument } from '../functions/orchestrator/api.ts';
import { PROJECT_ROOT } from '../local/postgres.ts';

export const OPENAPI_PATH = path.join(PROJECT_ROOT, 'openapi.json');

/** The document as it is written to openapi.json. */
export function openApiText(): string {
  return `${JSON.stringify(openApiDocument(), null, 2)}\n`;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const text = openApiText();
  if (process.argv.includes('--check')) {
    const current = await readFile(OPENAPI_PATH, 'utf8').catch(() => '');
    if (current !== text) {
      console.error('openapi.json is out of date: run `npx tsx scripts/openapi.ts`');
      process.exit(1);
    }
    console.log('openapi.json is up to date');
  } else {
    await writeFile(OPENAPI_PATH, text);
    console.log(`wrote ${path.relative(process.cwd(), OPENAPI_PATH)}`);
  }
}
