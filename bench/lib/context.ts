// What every scenario gets, and what it gives back.
import type { BenchPostgres } from './pg.ts';
import type { Figure } from './report.ts';
import type { Checks } from './result.ts';

export interface BenchContext {
  pg: BenchPostgres;
  quick: boolean;
  /** Repetitions per figure (quick: 1). */
  reps: number;
  checks: Checks;
  /** Scenario 12's size (--fleet-portals, --fleet-minutes) and tick bound (--fleet-runs-per-tick); unset: its defaults. */
  fleet?: { portals?: number; minutes?: number; runsPerTick?: number };
  log(line: string): void;
  /** Notes that go under the table (choices, caveats). */
  note(text: string): void;
  /**
   * Writes a file next to the results (e.g. a chart) and returns its name
   * there; a quick run's names start with `quick.` (never committed).
   */
  artifact(name: string, content: string): Promise<string>;
}

export interface ScenarioResult {
  figures: Figure[];
  details: Record<string, unknown>;
}
