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
  /** When and at which commit each group of scenarios was measured (one per run merged into the file). */
  sections: readonly Section[];
}

/** One bench run's share of a results file: its scenarios, when, on which code, under which load. */
export interface Section {
  ids: string[];
  startedAt: string;
  commit: string | null;
  modified: string[];
  durationS: number;
  repetitions: number;
  loadAverage: number[];
}

/** A note under the table, tagged with its scenario (so a rerun of that scenario replaces it). */
export interface Note {
  scenario: string;
  text: string;
}

function sectionLine(s: Section): string {
  const code = `${s.commit?.slice(0, 12) ?? 'unknown commit'}${s.modified.length ? ` + uncommitted changes in ${s.modified.join(', ')}` : ''}`;
  const ids = [...s.ids].sort((x, y) => parseFloat(x) - parseFloat(y));
  return `scenario${ids.length > 1 ? 's' : ''} ${ids.join(', ')}: ${s.startedAt}, code ${code}, ${s.repetitions} repetition(s), ` +
    `${round(s.durationS, 0)} s, load average ${s.loadAverage.join(' / ')} at the end`;
}

/** The markdown report: machine line, when each scenario was measured, one table of every figure, notes, failed checks. */
export function renderMarkdown(meta: ReportMeta, figures: readonly Figure[], notes: readonly Note[], failedChecks: readonly string[]): string {
  const m = meta.machine;
  const latest = meta.sections.map((s) => s.startedAt).sort().at(-1) ?? 'unknown';
  const lines = [
    `# Benchmark (${meta.mode}) — ${latest}`,
    '',
    `Machine: ${String(m.nproc)} × ${String(m.cpuModel)}, ${String(m.totalMemoryMb)} MB RAM, Node ${String(m.node)}, Postgres ${String(m.postgres)}. ` +
      'Each figure: median of the interleaved repetitions, min–max in brackets.',
    '',
    ...(meta.sections.length === 1
      ? [`Measured: ${sectionLine(meta.sections[0]!)}.`]
      : ['Measured in separate runs:', '', ...meta.sections.map((s) => `- ${sectionLine(s)}`)]),
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
    lines.push('', '## Notes', '', ...notes.map((n) => `- ${n.text}`));
  }
  lines.push('', failedChecks.length ? `## Correctness checks FAILED (${failedChecks.length})\n\n${failedChecks.map((c) => `- ${c}`).join('\n')}` : '## Correctness checks: all passed');
  return `${lines.join('\n')}\n`;
}
