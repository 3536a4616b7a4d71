// Scenario 2: does claiming get slower as finished history piles up? The same
// pending jobs drained (8 workers, claim_next_job → complete_job) on top of
// 10,000 vs 1,000,000 finished jobs (quick: 10,000 vs 50,000), interleaved.
// Also queue_stats on the same two databases: it must answer in the same time
// whatever the history (and, for reference, the full GROUP BY over every job
// it ran before).
import type { BenchContext, ScenarioResult } from '../lib/context.ts';
import { cloneDatabase, dropDatabase, migratedDatabase, pool } from '../lib/pg.ts';
import { atMost, figure } from '../lib/report.ts';
import type { QueueRunResult } from '../lib/result.ts';
import { historyOrphans, seedFinishedHistory, seedPendingJobs, seedUsersAndPortals } from '../lib/seed.ts';
import { median, percentile } from '../lib/stats.ts';
import { runOurs } from './throughput-ours.ts';

const S = '2';
const WORKERS = 8;

export async function claimCost(ctx: BenchContext): Promise<ScenarioResult> {
  const sizes = ctx.quick ? [10_000, 50_000] : [10_000, 1_000_000];
  const portals = ctx.quick ? 64 : 500;
  const pending = portals * 8;
  const templates: string[] = [];
  const stats: { queueStatsMs: number[]; fullScanMs: number[] }[] = [];
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
      stats.push(await timeQueueStats(sql, ctx.quick ? 5 : 20));
      ctx.log(`[2] queue_stats with ${history} finished: median ${median(stats.at(-1)!.queueStatsMs).toFixed(2)} ms ` +
        `(the full GROUP BY it replaced: ${median(stats.at(-1)!.fullScanMs).toFixed(1)} ms)`);
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
  const [statsSmall, statsLarge] = stats as [(typeof stats)[0], (typeof stats)[0]];
  const [hs, hl] = sizes.map((n) => n.toLocaleString('en-US')) as [string, string];
  const goal = ctx.quick ? undefined : atMost(1.2, '≤ 1.2');
  ctx.note(`Scenario 2: ${pending.toLocaleString('en-US')} pending jobs drained by ${WORKERS} workers (claim_next_job → complete_job, as 1a) on top of ` +
    `${hs} vs ${hl} finished jobs (inserted with one INSERT … SELECT generate_series, in finished runs of 1,000; then VACUUM ANALYZE). ` +
    `Latency = claim call start → complete_job returned, per job. Claim-cost ratio = p50 latency with ${hl} ÷ with ${hs}, per repetition. ` +
    `queue_stats: ${ctx.quick ? 5 : 20} calls on each template (after 3 unmeasured), client wall time, median; the reference is ` +
    `"select kind, status, count(*) from jobs group by 1, 2", the part of the former queue_stats that read every job.`);
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
      figure(S, `queue_stats, ${hs} finished`, 'ms', statsSmall.queueStatsMs),
      figure(S, `queue_stats, ${hl} finished`, 'ms', statsLarge.queueStatsMs),
      figure(S, `queue_stats ratio (${hl} ÷ ${hs})`, 'ratio', [median(statsLarge.queueStatsMs) / median(statsSmall.queueStatsMs)],
        { goal: ctx.quick ? undefined : atMost(1.5, '≤ 1.5 (constant time)') }),
      figure(S, `reference: the former full GROUP BY over every job, ${hl} finished`, 'ms', statsLarge.fullScanMs),
    ],
    details: {
      historySizes: sizes,
      queueStats: stats.map((x, i) => ({ history: sizes[i], queueStatsMs: x.queueStatsMs, fullScanMs: x.fullScanMs })),
      pendingJobs: pending,
      workers: WORKERS,
      runs: runs.map((rs, i) => ({ history: sizes[i], runs: rs.map(({ latenciesMs, ...rest }) => ({ ...rest, p50: p({ latenciesMs } as QueueRunResult, 50), p99: p({ latenciesMs } as QueueRunResult, 99) })) })),
    },
  };
}

/** Times queue_stats (and the full scan it replaced) on a template: `n` calls each after 3 unmeasured. */
async function timeQueueStats(sql: ReturnType<typeof pool>, n: number): Promise<{ queueStatsMs: number[]; fullScanMs: number[] }> {
  const time = async (q: () => Promise<unknown>) => {
    for (let i = 0; i < 3; i++) await q();
    const out: number[] = [];
    for (let i = 0; i < n; i++) {
      const t0 = performance.now();
      await q();
      out.push(performance.now() - t0);
    }
    return out;
  };
  return {
    queueStatsMs: await time(() => sql`select public.queue_stats() as s`),
    fullScanMs: await time(() => sql`select j.kind, j.status, count(*) from public.jobs j group by j.kind, j.status`),
  };
}

function p(r: QueueRunResult, q: number): number {
  return percentile(r.latenciesMs ?? [], q);
}
