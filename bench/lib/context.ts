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
  log(line: string): void;
  /** Notes that go under the table (choices, caveats). */
  note(text: string): void;
}

export interface ScenarioResult {
  figures: Figure[];
  details: Record<string, unknown>;
}
