// Each edge function's deployable bundle stays within what Supabase accepts when
// it bundles on the server (5 MB; the CLI's local bundling allows 20 MB): the
// real entrypoint bundled by Deno, minified, with every npm dependency inlined.
import { execFile } from 'node:child_process';
import { mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../local/postgres.ts';

const run = promisify(execFile);
const DENO = path.join(PROJECT_ROOT, 'node_modules/.bin/deno');
const LIMIT_BYTES = 5_000_000; // 5 MB, decimal: the stricter reading of the limit
const FUNCTIONS = ['orchestrator', 'worker'] as const;
const outDir = mkdtemp(path.join(tmpdir(), 'queue-bundles-'));

afterAll(async () => {
  await rm(await outDir, { recursive: true, force: true });
});

describe('deployable bundle size', () => {
  for (const fn of FUNCTIONS) {
    it(`${fn}: deno bundle --minify is at most 5 MB`, async () => {
      const out = path.join(await outDir, `${fn}.js`);
      await run(DENO, ['bundle', '--config', 'deno.json', '--minify', '--platform', 'deno', '-o', out, `supabase/functions/${fn}/index.ts`], {
        cwd: PROJECT_ROOT,
        env: { ...process.env, NO_COLOR: '1' },
        maxBuffer: 16 * 1024 * 1024,
        timeout: 120_000,
      });
      const { size } = await stat(out);
      console.log(`bundle ${fn}: ${(size / 1e6).toFixed(2)} MB (${size} bytes; limit ${LIMIT_BYTES})`);
      expect(size).toBeGreaterThan(10_000); // it did bundle something
      expect(size, `${fn} bundle is ${(size / 1e6).toFixed(2)} MB`).toBeLessThanOrEqual(LIMIT_BYTES);
    }, 150_000);
  }
});
