// `npm run bench` — every scenario on a Postgres this process starts (or
// DATABASE_URL); writes bench/results/latest.json and latest.md and prints the
// table. A full run of some scenarios (`--only=`) replaces only their figures,
// checks, notes and details in latest.*, keeping the other scenarios' figures
// with the date and commit they were measured at. `--quick`: tiny sizes, one
// repetition, correctness checks only; it writes quick.* instead (gitignored),
// so it never replaces a full run's results. See USAGE for the options.
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import type { BenchContext, ScenarioResult } from './lib/context.ts';
import { gitState, machineInfo } from './lib/machine.ts';
import { startBenchPostgres } from './lib/pg.ts';
import { renderMarkdown, type Figure, type Note, type Section } from './lib/report.ts';
import { Checks, type Check } from './lib/result.ts';
import { claimCost } from './scenarios/claim-cost.ts';
import { edgeLargePortal } from './scenarios/edge-large-portal.ts';
import { exportScenario } from './scenarios/export.ts';
import { fetchThroughput } from './scenarios/fetch-throughput.ts';
import { fleet } from './scenarios/fleet.ts';
import { portalLimits } from './scenarios/portal-limits.ts';
import { publishScenario } from './scenarios/publish.ts';
import { httpScenarios } from './scenarios/http-system.ts';
import { incrementalSync } from './scenarios/incremental-sync.ts';
import { storeCost } from './scenarios/store-cost.ts';
import { syncFleet } from './scenarios/sync-fleet.ts';
import { queueThroughput } from './scenarios/throughput.ts';

const SCENARIOS: { id: string; name: string; run: (ctx: BenchContext) => Promise<ScenarioResult> }[] = [
  { id: '1', name: 'queue throughput', run: queueThroughput },
  { id: '2', name: 'claim cost as history grows', run: claimCost },
  { id: '3+6', name: 'trigger-to-start latency and orchestrator under load (one system, interleaved)', run: httpScenarios },
  { id: '4', name: 'fetch throughput vs the rate limit', run: fetchThroughput },
  { id: '5', name: 'export rows/s and peak RSS', run: exportScenario },
  { id: '7', name: 'a fleet: one large and 100 small portals under the edge limits', run: fleet },
  { id: '8', name: 'a large portal under the enforced edge limits', run: edgeLargePortal },
  { id: '9', name: 'Postgres CPU per stored item (save_fetched_page_raw)', run: storeCost },
  { id: '10', name: 'each portal\'s own HubSpot limits: four portal kinds fetched at once', run: portalLimits },
  { id: '11', name: 'incremental sync of the 180,000-item portal: requests, CPU and freshness against the full sync', run: incrementalSync },
  { id: '12', name: 'a sync fleet: 1,000 portals on one-minute schedules for 10 minutes, run by the local cron', run: syncFleet },
  { id: '13', name: 'publish: 10,000 edits of the scenario-8 portal planned, applied under cut-offs and rolled back', run: publishScenario },
];
const SCENARIO_IDS = SCENARIOS.flatMap((s) => s.id.split('+')).sort((a, b) => Number(a) - Number(b));

const USAGE = `Usage: npm run bench -- [--quick] [--only=IDS] [--reps=N] [--out=DIR]

  --quick       tiny sizes, 1 repetition, correctness checks only; writes quick.* (not committed)
  --only=IDS    run these scenarios only, comma-separated (${SCENARIO_IDS.join(', ')}); a full run
                merges them into latest.*, keeping the other scenarios' figures
  --reps=N      repetitions per figure (default 3; --quick: 1)
  --out=DIR     write the results to DIR (default bench/results)
  --fleet-portals=N  scenario 12's portals (default 1000; e.g. 2000, 4000; a development run: 100)
  --fleet-minutes=N  scenario 12's minutes on the clock (default 10; a development run: 3)
  --fleet-runs-per-tick=N  scenario 12's private.sync_settings.max_runs_per_tick (default: the schema's)
  -h, --help    print this text`;

interface Options {
  quick: boolean;
  only: string[] | null;
  reps: number | null;
  out: string | null;
  fleet: { portals?: number; minutes?: number; runsPerTick?: number };
}

/** The options, or null after printing why they are wrong (exit code 2). */
function parseOptions(argv: string[]): Options | 'help' | null {
  const fail = (message: string) => {
    console.error(`bench: ${message}\n\n${USAGE}`);
    return null;
  };
  let values;
  try {
    ({ values } = parseArgs({
      args: argv,
      strict: true,
      allowPositionals: false,
      options: {
        quick: { type: 'boolean' },
        only: { type: 'string' },
        reps: { type: 'string' },
        out: { type: 'string' },
        'fleet-portals': { type: 'string' },
        'fleet-minutes': { type: 'string' },
        'fleet-runs-per-tick': { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
    }));
  } catch (e) {
    return fail(e instanceof Error ? e.message : String(e));
  }
  if (values.help) return 'help';
  let only: string[] | null = null;
  if (values.only !== undefined) {
    only = values.only.split(',').map((s) => s.trim()).filter(Boolean);
    const unknown = only.filter((id) => !SCENARIO_IDS.includes(id));
    if (only.length === 0 || unknown.length) return fail(`--only: unknown scenario ${unknown.join(', ') || '(none given)'}; known: ${SCENARIO_IDS.join(', ')}`);
  }
  let reps: number | null = null;
  if (values.reps !== undefined) {
    reps = Number(values.reps);
    if (!/^\d+$/.test(values.reps) || !Number.isInteger(reps) || reps < 1) return fail(`--reps must be a whole number ≥ 1, got '${values.reps}'`);
  }
  const fleet: Options['fleet'] = {};
  if (values['fleet-portals'] !== undefined) {
    fleet.portals = Number(values['fleet-portals']);
    if (!/^\d+$/.test(values['fleet-portals']) || fleet.portals < 1 || fleet.portals > 20_000) return fail(`--fleet-portals must be a whole number from 1 to 20000, got '${values['fleet-portals']}'`);
  }
  if (values['fleet-minutes'] !== undefined) {
    fleet.minutes = Number(values['fleet-minutes']);
    if (!(fleet.minutes >= 0.5 && fleet.minutes <= 240)) return fail(`--fleet-minutes must be from 0.5 to 240, got '${values['fleet-minutes']}'`);
  }
  if (values['fleet-runs-per-tick'] !== undefined) {
    fleet.runsPerTick = Number(values['fleet-runs-per-tick']);
    if (!/^\d+$/.test(values['fleet-runs-per-tick']) || fleet.runsPerTick < 1) return fail(`--fleet-runs-per-tick must be a positive whole number, got '${values['fleet-runs-per-tick']}'`);
  }
  return { quick: values.quick ?? false, only, reps, out: values.out ?? null, fleet };
}

/** The JSON file: figures, checks, notes and details per scenario, and when each scenario was measured. */
interface ResultsFile {
  mode: 'quick' | 'full';
  startedAt: string;
  durationS: number;
  repetitions: number;
  machine: ReturnType<typeof machineInfo>;
  git: ReturnType<typeof gitState>;
  sections: Section[];
  figures: Figure[];
  checks: Check[];
  errors: string[];
  notes: Note[];
  details: Record<string, unknown>;
}

/** Which scenario a note written before notes were tagged belongs to ("Scenario 4: …", "8: …"). */
function legacyNoteScenario(text: string): string {
  return /^(?:Scenarios? )?(\d+)/.exec(text)?.[1] ?? '?';
}

/**
 * The previous full results in `file`, without the scenarios `ids` (rerun
 * now); null when there are none. Files from before sections existed count as
 * one section measured at their startedAt.
 */
async function previousResults(file: string, ids: readonly string[]): Promise<Pick<ResultsFile, 'sections' | 'figures' | 'checks' | 'notes' | 'details' | 'errors'> | null> {
  let old: Partial<ResultsFile> & { notes?: (Note | string)[] };
  try {
    old = JSON.parse(await readFile(file, 'utf8')) as typeof old;
  } catch {
    return null;
  }
  if (old.mode !== 'full') return null;
  const rerun = (scenario: string) => scenario.split('+').some((id) => ids.includes(id));
  const sections = (old.sections ?? [{
    ids: Object.keys(old.details ?? {}), startedAt: old.startedAt ?? 'unknown', commit: old.git?.commit ?? null,
    modified: old.git?.modified ?? [], durationS: old.durationS ?? 0, repetitions: old.repetitions ?? 0, loadAverage: old.machine?.loadAverage ?? [],
  }]).map((s) => ({ ...s, ids: s.ids.filter((id) => !rerun(id)) })).filter((s) => s.ids.length > 0);
  const notes = (old.notes ?? []).map((n) => (typeof n === 'string' ? { scenario: legacyNoteScenario(n), text: n } : n));
  return {
    sections,
    figures: (old.figures ?? []).filter((f) => !rerun(f.scenario)),
    checks: (old.checks ?? []).filter((c) => !rerun(c.scenario)),
    notes: notes.filter((n) => !rerun(n.scenario)),
    details: Object.fromEntries(Object.entries(old.details ?? {}).filter(([id]) => !rerun(id))),
    errors: (old.errors ?? []).filter((e) => !SCENARIOS.some((s) => rerun(s.id) && e.startsWith(`scenario ${s.id} `))),
  };
}

async function main(opts: Options): Promise<number> {
  const t0 = performance.now();
  const log = (line: string) => console.error(`[bench ${((performance.now() - t0) / 1000).toFixed(1)}s] ${line}`);
  const here = path.dirname(fileURLToPath(import.meta.url));
  const resultsDir = opts.out ? path.resolve(opts.out) : path.join(here, 'results');
  // A smoke run never overwrites the full run's figures.
  const outName = opts.quick ? 'quick' : 'latest';
  const startedAt = new Date().toISOString();
  const git = gitState(path.join(here, '..'));
  const selected = SCENARIOS.filter((s) => !opts.only || s.id.split('+').some((id) => opts.only!.includes(id)));
  const pg = await startBenchPostgres(log);
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      log(`${signal}: stopping Postgres`);
      void pg.stop().finally(() => process.exit(130));
    });
  }
  await mkdir(resultsDir, { recursive: true });
  const checks = new Checks(log);
  const notes: Note[] = [];
  let current = '?';
  const ctx: BenchContext = {
    pg, quick: opts.quick, reps: opts.reps ?? (opts.quick ? 1 : 3), checks, log, fleet: opts.fleet,
    note: (text) => notes.push({ scenario: current, text }),
    async artifact(name, content) {
      const file = opts.quick ? `quick.${name}` : name;
      await writeFile(path.join(resultsDir, file), content);
      return file;
    },
  };
  const figures: Figure[] = [];
  const details: Record<string, unknown> = {};
  const errors: string[] = [];
  try {
    for (const s of selected) {
      current = s.id;
      log(`scenario ${s.id}: ${s.name}`);
      const st = performance.now();
      try {
        const r = await s.run(ctx);
        figures.push(...r.figures);
        details[s.id] = { name: s.name, durationS: (performance.now() - st) / 1000, ...r.details };
      } catch (e) {
        const msg = e instanceof Error ? (e.stack ?? e.message) : String(e);
        errors.push(`scenario ${s.id} (${s.name}) crashed: ${msg}`);
        checks.expect(s.id, `scenario ${s.id} ran to the end`, false, msg.split('\n')[0] ?? msg);
      }
      log(`scenario ${s.id} done in ${((performance.now() - st) / 1000).toFixed(1)} s`);
    }
  } finally {
    await pg.stop();
  }
  const durationS = (performance.now() - t0) / 1000;
  const machine = machineInfo(pg.version);
  const section: Section = {
    ids: selected.map((s) => s.id), startedAt, commit: git.commit, modified: git.modified, durationS, repetitions: ctx.reps, loadAverage: machine.loadAverage,
  };
  const ranIds = selected.flatMap((s) => s.id.split('+'));
  const previous = opts.quick ? null : await previousResults(path.join(resultsDir, `${outName}.json`), ranIds);
  const json: ResultsFile = {
    mode: opts.quick ? 'quick' : 'full',
    startedAt,
    durationS,
    repetitions: ctx.reps,
    machine,
    git,
    sections: [...(previous?.sections ?? []), section],
    figures: [...(previous?.figures ?? []), ...figures].sort((a, b) => a.scenario.localeCompare(b.scenario)), // stable: keeps each scenario's order
    checks: [...(previous?.checks ?? []), ...checks.all],
    errors: [...(previous?.errors ?? []), ...errors],
    notes: [...(previous?.notes ?? []), ...notes].sort((a, b) => a.scenario.localeCompare(b.scenario)),
    details: { ...(previous?.details ?? {}), ...details },
  };
  const failedNow = checks.failed.map((c) => `[${c.scenario}] ${c.name}: ${c.detail}`);
  const failedAll = json.checks.filter((c) => !c.ok).map((c) => `[${c.scenario}] ${c.name}: ${c.detail}`);
  const markdown = renderMarkdown({ mode: json.mode, machine: { ...machine }, sections: json.sections }, json.figures, json.notes, failedAll);
  await writeFile(path.join(resultsDir, `${outName}.json`), `${JSON.stringify(json, null, 2)}\n`);
  await writeFile(path.join(resultsDir, `${outName}.md`), markdown);
  console.log(markdown);
  for (const e of errors) console.error(e);
  log(`${checks.all.length} checks, ${failedNow.length} failed; results in ${path.join(resultsDir, outName)}.{json,md}`);
  return failedNow.length === 0 && errors.length === 0 ? 0 : 1;
}

const opts = parseOptions(process.argv.slice(2));
if (opts === null) process.exit(2);
if (opts === 'help') {
  console.log(USAGE);
  process.exit(0);
}
main(opts).then(
  (code) => process.exit(code),
  (e) => {
    console.error(e);
    process.exit(1);
  },
);
