// `npm run bench` — every scenario on a Postgres this process starts (or
// DATABASE_URL); writes bench/results/latest.json and latest.md and prints the
// table. `--quick`: tiny sizes, one repetition, correctness checks only.
// `--quick` writes quick.{json,md} instead, so it never replaces a full run's results.
// `--out=DIR`: write the results there. `--only=1,4`, `--reps=N`: run some
// scenarios / change repetitions (development).
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { BenchContext, ScenarioResult } from './lib/context.ts';
import { gitState, machineInfo } from './lib/machine.ts';
import { startBenchPostgres } from './lib/pg.ts';
import { renderMarkdown, type Figure } from './lib/report.ts';
import { Checks } from './lib/result.ts';
import { claimCost } from './scenarios/claim-cost.ts';
import { edgeLargePortal } from './scenarios/edge-large-portal.ts';
import { exportScenario } from './scenarios/export.ts';
import { fetchThroughput } from './scenarios/fetch-throughput.ts';
import { httpScenarios } from './scenarios/http-system.ts';
import { queueThroughput } from './scenarios/throughput.ts';

const SCENARIOS: { id: string; name: string; run: (ctx: BenchContext) => Promise<ScenarioResult> }[] = [
  { id: '1', name: 'queue throughput', run: queueThroughput },
  { id: '2', name: 'claim cost as history grows', run: claimCost },
  { id: '3+6', name: 'trigger-to-start latency and orchestrator under load (one system, interleaved)', run: httpScenarios },
  { id: '4', name: 'fetch throughput vs the rate limit', run: fetchThroughput },
  { id: '5', name: 'export rows/s and peak RSS', run: exportScenario },
  { id: '8', name: 'a large portal under the enforced edge limits', run: edgeLargePortal },
];

const args = process.argv.slice(2);
const quick = args.includes('--quick');
const only = args.find((a) => a.startsWith('--only='))?.slice('--only='.length).split(',');
const repsArg = Number(args.find((a) => a.startsWith('--reps='))?.slice('--reps='.length));
const outArg = args.find((a) => a.startsWith('--out='))?.slice('--out='.length);
const resultsDir = outArg ? path.resolve(outArg) : path.join(path.dirname(fileURLToPath(import.meta.url)), 'results');
// A smoke run never overwrites the full run's figures.
const outName = quick ? 'quick' : 'latest';
const t0 = performance.now();
const log = (line: string) => console.error(`[bench ${((performance.now() - t0) / 1000).toFixed(1)}s] ${line}`);

async function main(): Promise<number> {
  const startedAt = new Date().toISOString();
  const git = gitState(path.join(path.dirname(fileURLToPath(import.meta.url)), '..'));
  const pg = await startBenchPostgres(log);
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      log(`${signal}: stopping Postgres`);
      void pg.stop().finally(() => process.exit(130));
    });
  }
  const checks = new Checks(log);
  const notes: string[] = [];
  const ctx: BenchContext = { pg, quick, reps: Number.isInteger(repsArg) && repsArg > 0 ? repsArg : quick ? 1 : 3, checks, log, note: (n) => notes.push(n) };
  const figures: Figure[] = [];
  const details: Record<string, unknown> = {};
  const errors: string[] = [];
  try {
    for (const s of SCENARIOS) {
      if (only && !s.id.split('+').some((id) => only.includes(id))) continue;
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
  figures.sort((a, b) => a.scenario.localeCompare(b.scenario)); // stable: keeps each scenario's order
  const durationS = (performance.now() - t0) / 1000;
  const machine = machineInfo(pg.version);
  const failed = checks.failed.map((c) => `[${c.scenario}] ${c.name}: ${c.detail}`);
  const markdown = renderMarkdown({ mode: quick ? 'quick' : 'full', machine: { ...machine }, git, startedAt, durationS, repetitions: ctx.reps }, figures, notes, failed);
  const json = {
    mode: quick ? 'quick' : 'full',
    startedAt,
    durationS,
    repetitions: ctx.reps,
    machine,
    git,
    figures,
    checks: checks.all,
    errors,
    notes,
    details,
  };
  await mkdir(resultsDir, { recursive: true });
  await writeFile(path.join(resultsDir, `${outName}.json`), `${JSON.stringify(json, null, 2)}\n`);
  await writeFile(path.join(resultsDir, `${outName}.md`), markdown);
  console.log(markdown);
  for (const e of errors) console.error(e);
  log(`${checks.all.length} checks, ${failed.length} failed; results in ${path.join(resultsDir, outName)}.{json,md}`);
  return failed.length === 0 && errors.length === 0 ? 0 : 1;
}

main().then(
  (code) => process.exit(code),
  (e) => {
    console.error(e);
    process.exit(1);
  },
);
