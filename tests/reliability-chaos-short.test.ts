// The chaos run, short: `npx tsx scripts/chaos.ts --seconds 40` as a child
// process (its own Postgres, simulator and worker processes) must exit 0, i.e.
// find no violation after kills, a freeze, HubSpot fault bursts, a Postgres
// restart and duplicate triggers. Results go to a temp dir, not bench/results.
import { spawn } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../local/postgres.ts';

describe('chaos (short)', () => {
  it('40 seconds of chaos end with every invariant intact', async () => {
    const out = await mkdtemp(path.join(tmpdir(), 'queue-chaos-short-'));
    // Its own process group: on a timeout the whole tree (npx, tsx, node, workers, Postgres) goes.
    const child = spawn('npx', ['tsx', 'scripts/chaos.ts', '--seconds', '40', '--out', out], {
      cwd: PROJECT_ROOT,
      env: process.env,
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    let output = '';
    child.stdout.on('data', (b: Buffer) => (output += b.toString()));
    child.stderr.on('data', (b: Buffer) => (output += b.toString()));
    const timer = setTimeout(() => {
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch {
        // already gone
      }
    }, 150_000);
    const code = await new Promise<number | null>((resolve) => child.once('exit', (c) => resolve(c)));
    clearTimeout(timer);
    try {
      expect(code, output.slice(-6000)).toBe(0);
      const result = JSON.parse(await readFile(path.join(out, 'chaos-latest.json'), 'utf8')) as { ok: boolean; figures: Record<string, number>; violations: unknown[] };
      console.log(output.split('\n').filter((l) => l.startsWith('  ') || l.startsWith('chaos ')).join('\n'));
      expect(result.violations).toEqual([]);
      expect(result.ok).toBe(true);
      const f = result.figures;
      expect(f.kills).toBeGreaterThan(0);
      expect(f.pgRestarts).toBe(1);
      expect(f.freezes).toBeGreaterThan(0);
      expect(f.faultBursts).toBeGreaterThan(0);
      expect((f.triggersAllDuplicate ?? 0) + (f.duplicateTypesRefused ?? 0)).toBeGreaterThan(0);
      expect(f.lost).toBe(0);
      expect(f.duplicated).toBe(0);
      expect(f.items).toBeGreaterThan(0);
    } finally {
      await rm(out, { recursive: true, force: true });
    }
  }, 170_000);
});
