// The benchmark's smoke run: every scenario runs at tiny sizes and its
// correctness checks hold (no timing is asserted). Results go to a temp dir so
// a full run's bench/results/latest.* are never touched. And the runner's
// options: anything it does not know is refused before it starts anything.
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

function runBench(args: string[], timeout: number): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile('npx', ['tsx', 'bench/run.ts', ...args], { cwd: root, timeout, maxBuffer: 32 * 1024 * 1024 },
      (error, stdout, stderr) => resolve({ code: error ? ((error as { code?: number }).code ?? 1) : 0, stdout, stderr }));
  });
}

describe('npm run bench -- --quick', () => {
  it('runs every scenario and exits 0 with all correctness checks passing', async () => {
    const out = await mkdtemp(path.join(tmpdir(), 'bench-quick-test-'));
    try {
      // ~2 min on an idle 2-core machine; the kill is far out of the way, so a loaded machine is slow, not red.
      const result = await runBench(['--quick', `--out=${out}`], 540_000);
      expect(result.code, `bench --quick failed:\n${result.stderr.slice(-4000)}`).toBe(0);
      const json = JSON.parse(await readFile(path.join(out, 'quick.json'), 'utf8')) as {
        mode: string; checks: { ok: boolean }[]; errors: string[]; figures: { scenario: string }[];
      };
      expect(json.mode).toBe('quick');
      expect(json.errors).toEqual([]);
      expect(json.checks.length).toBeGreaterThan(0);
      expect(json.checks.filter((c) => !c.ok)).toEqual([]);
      expect([...new Set(json.figures.map((f) => f.scenario))].sort()).toEqual(['1', '10', '11', '12', '13', '2', '3', '4', '5', '6', '7', '8', '9']);
      expect(result.stdout).toContain('| # | Figure |');
      // The fleet chart goes next to the results under a quick name (gitignored), never as fleet.svg.
      const svg = await readFile(path.join(out, 'quick.fleet.svg'), 'utf8');
      expect(svg).toMatch(/^<svg [^>]*xmlns="http:\/\/www.w3.org\/2000\/svg"/);
      expect(svg).toContain('small portals');
      await expect(readFile(path.join(out, 'fleet.svg'))).rejects.toThrow();
    } finally {
      await rm(out, { recursive: true, force: true });
    }
  }, 570_000);

  it.each([
    [['--qiuck'], /Unknown option '--qiuck'/],
    [['--only=99'], /--only: unknown scenario 99/],
    [['--reps=two'], /--reps must be a whole number/],
    [['--fleet-portals=lots'], /--fleet-portals must be a whole number/],
    [['extra'], /Unexpected argument 'extra'/],
  ])('refuses %j with a message and the usage, exit code 2', async (args, message) => {
    const result = await runBench(args, 60_000);
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(message);
    expect(result.stderr).toContain('Usage: npm run bench --');
    expect(result.stderr).not.toContain('embedded Postgres'); // refused before starting anything
  }, 70_000);
});
