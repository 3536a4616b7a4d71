// Scenario 2: does claiming get slower as finished history piles up? The same
// pending jobs drained (8 workers, claim_next_job → complete_job) on top of
// 10,000 vs 1,000,000 finished jobs (quick: 10,000 vs 50,000), interleaved.
import type { BenchContext, ScenarioResult } from '../lib/context.ts';
import { cloneDatabase, dropDatabase, migratedDatabase, pool } from '../lib/pg.ts';
import { atMost, figure } from '../lib/report.ts';
import type { QueueRunResult } from '../lib/result.ts';
import { historyOrphans, seedFinishedHistory, seedPendingJobs, seedUsersAndPortals } from '../lib/seed.ts';
import { percentile } from '../lib/stats.ts';
import { runOurs } from './throughput-ours.ts';

const S = '2';
const WORKERS = 8;

export async function claimCost(ctx: BenchContext): Promise<ScenarioResult> {
  const sizes = ctx.quick ? [10_000, 50_000] : [10_000, 1_000_000];
  const portals = ctx.quick ? 64 : 500;
  const pending = portals * 8;
  const templates: string[] = [];
  for (const history of sizes) {
    const t = performance.now();
    const url = await migratedDatabase(ctx.pg, `s2_tpl_${history}`);
    const sql = pool(url, 1);
    try {
      await seedUsersAndPortals(sql, 1, portals);
      await seedFinishedHistory(sql, history, portals);
      ctx.checks.equal(S, `pending jobs seeded (history ${history})`, await seedPendingJobs(sql, 1, portals), pending);
      ctx.checks.equal(S, `history of ${history}: every job has its run and portal`, await historyOrphans(sql), 0);
      await sql.unsafe('vacuum analyze');
      const [row] = await sql`select count(*)::int as n, pg_size_pretty(pg_total_relation_size('public.jobs')) as size from public.jobs`;
      ctx.log(`[2] template with ${history} finished jobs: ${row?.n} jobs, ${row?.size}, ${Math.round(performance.now() - t)} ms`);
    } finally {
      await sql.end({ timeout: 5 });
    }
    templates.push(url);
  }

  const runs: QueueRunResult[][] = sizes.map(() => []);
  for (let rep = 0; rep < ctx.reps; rep++) {
    const order = rep % 2 === 0 ? [0, 1] : [1, 0];
    for (const i of order) {
      const url = await cloneDatabase(ctx.pg, templates[i]!, 's2_run');
      try {
        const label = `history ${sizes[i]}`;
        const r = await runOurs({
          url, workers: WORKERS, mode: { kind: 'single' }, expectedJobs: pending, pgPid: ctx.pg.pid,
          recordLatency: true, checks: ctx.checks, scenario: S, label,
        });
        runs[i]!.push(r);
        ctx.log(`[2] rep ${rep + 1}/${ctx.reps} ${label}: ${Math.round(r.jobsPerSec)} jobs/s, p50 ${p(r, 50).toFixed(2)} ms, p99 ${p(r, 99).toFixed(2)} ms`);
      } finally {
        await dropDatabase(ctx.pg, url);
      }
    }
  }
  for (const url of templates) await dropDatabase(ctx.pg, url);

  const [small, large] = runs as [QueueRunResult[], QueueRunResult[]];
  const [hs, hl] = sizes.map((n) => n.toLocaleString('en-US')) as [string, string];
  const goal = ctx.quick ? undefined : atMost(1.2, '≤ 1.2');
  ctx.note(`Scenario 2: ${pending.toLocaleString('en-US')} pending jobs drained by ${WORKERS} workers (claim_next_job → complete_job, as 1a) on top of ` +
    `${hs} vs ${hl} finished jobs (inserted with one INSERT … SELECT generate_series, in finished runs of 1,000; then VACUUM ANALYZE). ` +
    `Latency = claim call start → complete_job returned, per job. Claim-cost ratio = p50 latency with ${hl} ÷ with ${hs}, per repetition.`);
  return {
    figures: [
      figure(S, `claim→complete p50, ${hs} finished`, 'ms', small.map((r) => p(r, 50))),
      figure(S, `claim→complete p50, ${hl} finished`, 'ms', large.map((r) => p(r, 50))),
      figure(S, `claim→complete p99, ${hs} finished`, 'ms', small.map((r) => p(r, 99))),
      figure(S, `claim→complete p99, ${hl} finished`, 'ms', large.map((r) => p(r, 99))),
      figure(S, `throughput, ${hs} finished`, 'jobs/s', small.map((r) => r.jobsPerSec)),
      figure(S, `throughput, ${hl} finished`, 'jobs/s', large.map((r) => r.jobsPerSec)),
      figure(S, `claim-cost ratio p50 (${hl} ÷ ${hs})`, 'ratio', large.map((r, i) => p(r, 50) / p(small[i]!, 50)), { goal }),
      figure(S, `claim-cost ratio p99 (${hl} ÷ ${hs})`, 'ratio', large.map((r, i) => p(r, 99) / p(small[i]!, 99))),
      figure(S, `throughput ratio (${hs} ÷ ${hl})`, 'ratio', large.map((r, i) => small[i]!.jobsPerSec / r.jobsPerSec)),
    ],
    details: {
      historySizes: sizes,
      pendingJobs: pending,
      workers: WORKERS,
      runs: runs.map((rs, i) => ({ history: sizes[i], runs: rs.map(({ latenciesMs, ...rest }) => ({ ...rest, p50: p({ latenciesMs } as QueueRunResult, 50), p99: p({ latenciesMs } as QueueRunResult, 99) })) })),
    },
  };
}

function p(r: QueueRunResult, q: number): number {
  return percentile(r.latenciesMs ?? [], q);
}
