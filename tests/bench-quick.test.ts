// The benchmark's smoke run: every scenario runs at tiny sizes and its
// correctness checks hold (no timing is asserted). Results go to a temp dir so
// a full run's bench/results/latest.* are never touched.
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

describe('npm run bench -- --quick', () => {
  it('runs every scenario and exits 0 with all correctness checks passing', async () => {
    const out = await mkdtemp(path.join(tmpdir(), 'bench-quick-test-'));
    try {
      const result = await new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
        execFile('npx', ['tsx', 'bench/run.ts', '--quick', `--out=${out}`], { cwd: root, timeout: 150_000, maxBuffer: 32 * 1024 * 1024 },
          (error, stdout, stderr) => resolve({ code: error ? ((error as { code?: number }).code ?? 1) : 0, stdout, stderr }));
      });
      expect(result.code, `bench --quick failed:\n${result.stderr.slice(-4000)}`).toBe(0);
      const json = JSON.parse(await readFile(path.join(out, 'quick.json'), 'utf8')) as {
        mode: string; checks: { ok: boolean }[]; errors: string[]; figures: { scenario: string }[];
      };
      expect(json.mode).toBe('quick');
      expect(json.errors).toEqual([]);
      expect(json.checks.length).toBeGreaterThan(0);
      expect(json.checks.filter((c) => !c.ok)).toEqual([]);
      expect([...new Set(json.figures.map((f) => f.scenario))].sort()).toEqual(['1', '2', '3', '4', '5', '6', '8']);
      expect(result.stdout).toContain('| # | Figure |');
    } finally {
      await rm(out, { recursive: true, force: true });
    }
  }, 160_000);
});
