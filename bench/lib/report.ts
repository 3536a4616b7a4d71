// Figures (median of repetitions with min–max), goals, and the markdown table.
import { round, summarize, type Summary } from './stats.ts';

export interface Goal {
  text: string;
  /** null: not evaluated (e.g. quick mode or not measurable here). */
  pass: boolean | null;
}

export interface Figure {
  scenario: string;
  name: string;
  unit: string;
  summary: Summary;
  goal?: Goal;
  note?: string;
}

export function figure(scenario: string, name: string, unit: string, values: readonly number[], extra: { goal?: (median: number) => Goal; note?: string } = {}): Figure {
  const summary = summarize(values);
  return { scenario, name, unit, summary, goal: extra.goal?.(summary.median), note: extra.note };
}

/** A goal "value ≥ threshold" (or ≤), judged on the median. */
export function atLeast(threshold: number, text: string): (m: number) => Goal {
  return (m) => ({ text, pass: Number.isFinite(m) ? m >= threshold : null });
}
export function atMost(threshold: number, text: string): (m: number) => Goal {
  return (m) => ({ text, pass: Number.isFinite(m) ? m <= threshold : null });
}

function fmt(v: number): string {
  if (!Number.isFinite(v)) return 'n/a';
  const a = Math.abs(v);
  if (a >= 1000) return Math.round(v).toLocaleString('en-US');
  if (a >= 100) return round(v, 0).toString();
  if (a >= 10) return round(v, 1).toString();
  return round(v, 3).toString();
}

function goalCell(g: Goal | undefined): string {
  if (!g) return '';
  const mark = g.pass === null ? '–' : g.pass ? 'met' : '**missed**';
  return `${g.text}: ${mark}`;
}

export interface ReportMeta {
  mode: 'quick' | 'full';
  machine: Record<string, unknown>;
  git: { commit: string | null; modified: string[] };
  startedAt: string;
  durationS: number;
  repetitions: number;
}

/** The markdown report: machine line, one table of every figure, notes, failed checks. */
export function renderMarkdown(meta: ReportMeta, figures: readonly Figure[], notes: readonly string[], failedChecks: readonly string[]): string {
  const m = meta.machine;
  const lines = [
    `# Benchmark (${meta.mode}) — ${meta.startedAt}`,
    '',
    `Machine: ${String(m.nproc)} × ${String(m.cpuModel)}, ${String(m.totalMemoryMb)} MB RAM, Node ${String(m.node)}, Postgres ${String(m.postgres)}. ` +
      `Each figure: median of ${meta.repetitions} interleaved repetition(s), min–max in brackets. Total ${round(meta.durationS, 0)} s.`,
    '',
    `Code: ${meta.git.commit ?? 'unknown commit'}${meta.git.modified.length ? ` + uncommitted changes in ${meta.git.modified.join(', ')}` : ''}.`,
    '',
    '| # | Figure | Median | Min–max | Unit | Goal |',
    '|---|--------|-------:|---------|------|------|',
  ];
  for (const f of figures) {
    const s = f.summary;
    const range = s.values.length > 1 ? `${fmt(s.min)}–${fmt(s.max)}` : '';
    lines.push(`| ${f.scenario} | ${f.name}${f.note ? ` (${f.note})` : ''} | ${fmt(s.median)} | ${range} | ${f.unit} | ${goalCell(f.goal)} |`);
  }
  if (notes.length) {
    lines.push('', '## Notes', '', ...notes.map((n) => `- ${n}`));
  }
  lines.push('', failedChecks.length ? `## Correctness checks FAILED (${failedChecks.length})\n\n${failedChecks.map((c) => `- ${c}`).join('\n')}` : '## Correctness checks: all passed');
  return `${lines.join('\n')}\n`;
}
