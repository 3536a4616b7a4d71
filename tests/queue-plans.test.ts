// The functions that act for a lease holder reach the held job through the
// primary key. A plan that reads the partial index of running jobs whole and
// filters it by id would cost every completion a read of every running job
// (and complete_jobs one per job in the batch): it once did, because that small
// index always looks cheaper to the generic plan. auto_explain reports the
// nested statements' real plans to this session. And the index of leases
// serves lease queries only: scanned whole for a portal's running jobs, it
// once turned batch claims 10-30 times slower for the rest of a drain.
import postgres from 'postgres';
import { describe, expect, it } from 'vitest';
import { holderPlans } from '../bench/scenarios/throughput-statements.ts';
import { benchIds, seedContent, seedFinishedHistory, seedPendingJobs, seedPendingRunsOf8, seedUsersAndPortals } from '../bench/lib/seed.ts';
import { completeProbeJob } from '../shared/sql/fetch.ts';
import { claimJobs, claimNextJob, completeJob } from '../shared/sql/jobs.ts';
import { operatorJobs, type OperatorJobFilter } from '../shared/sql/operator.ts';
import { createRun } from '../shared/sql/runs.ts';
import { useTestDatabase } from './support/database.ts';
import { runOf } from './support/fetch-fixtures.ts';

const db = useTestDatabase();

/**
 * Runs `body` on one direct connection whose nested statements' plans arrive as
 * notices (auto_explain, a session setting: never through the pooler). Without
 * auto_explain on the server, says what went unchecked and skips `body`.
 */
async function withPlanNotices(unchecked: string, body: (sql: postgres.Sql, notices: string[]) => Promise<void>): Promise<void> {
  const notices: string[] = [];
  const sql = postgres(db.directUrl, { prepare: false, max: 1, onnotice: (n) => notices.push(String(n.message)) });
  try {
    try {
      await sql`load 'auto_explain'`;
    } catch (e) {
      // A role that is not superuser may load only $libdir/plugins (hosted Supabase's `postgres` is none).
      console.log(`queue-plans: auto_explain is not available on this server (${e instanceof Error ? e.message : String(e)}): ${unchecked} not checked`);
      return;
    }
    await sql`select set_config('auto_explain.log_min_duration', '0', false), set_config('auto_explain.log_nested_statements', 'on', false),
      set_config('auto_explain.log_level', 'notice', false)`;
    await body(sql, notices);
  } finally {
    await sql.end({ timeout: 5 });
  }
}

describe('holder plans', () => {
  it('complete_job and complete_jobs reach the held jobs by jobs_pkey, with many jobs running', async () => {
    // 2,500 portals × 8 jobs; 1,200 of them running, so reading the running jobs whole would be visible.
    await seedUsersAndPortals(db.sql, 1, 2_500);
    await seedPendingJobs(db.sql, 1, 2_500);
    for (let i = 0; i < 4; i++) expect(await claimJobs(db.sql, `plans-holder-${i}`, 300)).toHaveLength(300);
    await db.sql`analyze public.jobs`;
    // auto_explain is a session setting: straight to Postgres, never through the pooler.
    const plans = await holderPlans(db.directUrl);
    if (!plans) {
      console.log('queue-plans: auto_explain is not available on this server (DATABASE_URL without it, or not superuser): plans not checked');
      return;
    }
    expect(plans).toEqual({ completeJob: 'jobs_pkey', completeJobs: 'jobs_pkey' });
  }, 120_000);

  it('with statistics that saw no pending job and no unfinished run, a claim and a completion still reach their rows by primary key', async () => {
    // Statistics taken when every job and run had finished, then 20,000 jobs pending in
    // 2,500 unfinished runs: the partial indexes of pending jobs and unfinished runs look
    // empty to the planner. Read whole and filtered by id, they once cost a fleet's claim
    // (which then also tried the claim lock of every portal it passed) and every run's
    // settlement several milliseconds each; and the claim read every due job and sorted them,
    // and a new run every unfinished run, for its portal's runs in flight.
    await db.sql`delete from public.runs`;
    await seedFinishedHistory(db.sql, 20_000, 2_500);
    await db.sql`analyze public.jobs`;
    await db.sql`analyze public.runs`;
    await seedPendingRunsOf8(db.sql, 1, 2_500);
    await withPlanNotices('claim and settlement plans', async (sql, notices) => {
      // 7 claims and completions: past the 5 calls after which a cached plan may turn generic.
      for (let i = 0; i < 7; i++) {
        notices.length = 0;
        const job = await claimNextJob(sql, `plans-claim-${i}`);
        expect(job).not.toBeNull();
        const pick = notices.find((n) => n.includes('limit 128) w')) ?? 'no plan of the one-job pick';
        expect(pick.match(/Scan using (\w+) on jobs j\b/)?.[1] ?? pick).toBe('jobs_pkey');
        // Its candidates read in claim order from the index, not every due job read and sorted.
        expect(pick.match(/Scan using (\w+) on jobs p\b/)?.[1] ?? pick).toBe('jobs_pending_rank_idx');
        expect(pick).not.toMatch(/Sort Key: p\.claim_rank/);
        notices.length = 0;
        expect(await completeJob(sql, job!)).toBe(true);
        const settle = notices.find((n) => n.includes('set jobs_completed = r.jobs_completed + p_completed')) ?? 'no plan of the settlement';
        expect(/Index Cond: \(id = /.test(settle) ? 'by id' : settle).toBe('by id');
      }
      // A new run looks for the portal's runs in flight by the portal, not through every unfinished run.
      for (let i = 0; i < 7; i++) {
        notices.length = 0;
        const { portalId, userId } = benchIds(100 + i);
        expect((await createRun(sql, { portalId, requestedBy: userId, kind: 'fetch', contentTypes: ['site_pages'] })).runId).toBeNull();
        const inFlight = notices.find((n) => n.includes('array_agg(distinct d.content_type)')) ?? 'no plan of the runs in flight';
        const runsScan = /Index Cond: \(portal_id = /.test(inFlight) && !inFlight.includes('runs_unfinished_idx') ? 'by portal' : inFlight;
        expect(runsScan).toBe('by portal');
      }
    });
  }, 120_000);

  it('the lease index answers lease queries only: a probe of running jobs by portal cannot scan it whole', async () => {
    // With the portal-keyed indexes out of the way (in a transaction, rolled
    // back), a probe of a portal's running jobs would scan the lease index if
    // its predicate allowed it; the expired-lease scan must still use it.
    // The generic plan (what the functions' force_generic_plan statements run): PREPARE +
    // EXPLAIN EXECUTE under plan_cache_mode = force_generic_plan, which Postgres 15 has too
    // (EXPLAIN (GENERIC_PLAN) is 16+).
    const explain = async (tx: { unsafe: (q: string) => Promise<Record<string, unknown>[]> }, query: string, types: string[] = []) => {
      const name = `queue_plans_${process.pid}_${Math.random().toString(36).slice(2, 8)}`;
      await tx.unsafe(`prepare ${name}${types.length ? `(${types.join(', ')})` : ''} as ${query}`);
      try {
        await tx.unsafe('set local plan_cache_mode = force_generic_plan');
        const rows = await tx.unsafe(`explain execute ${name}${types.length ? `(${types.map(() => 'null').join(', ')})` : ''}`);
        return rows.map((r) => String(r['QUERY PLAN'])).join('\n');
      } finally {
        await tx.unsafe(`deallocate ${name}`);
      }
    };
    const rollback = new Error('rollback');
    await db.sql.begin(async (tx) => {
      await tx`drop index public.jobs_running_portal_idx`;
      await tx`drop index public.jobs_one_active_per_portal_kind_type`;
      await tx`set local enable_seqscan = off`;
      const probe = await explain(tx, `select count(*) from public.jobs r where r.portal_id = $1 and r.kind = $2 and r.status = 'running'`, ['uuid', 'text']);
      expect(probe).toContain('$1'); // a generic plan: the portal is a parameter
      expect(probe).not.toContain('jobs_running_lease_idx');
      const leases = await explain(tx, `select j.id from public.jobs j where j.status = 'running' and j.lease_expires_at <= now()
                                        order by j.lease_expires_at limit 1000`);
      expect(leases).toContain('jobs_running_lease_idx');
      throw rollback;
    }).catch((e: unknown) => {
      if (e !== rollback) throw e;
    });
    const [idx] = await db.sql`select count(*)::int as n from pg_indexes where indexname = 'jobs_running_portal_idx'`;
    expect(idx!.n).toBe(1); // rolled back
  });

  it('storing a page looks each item up by the unique index, never by the change feed\'s (which only the feed can use)', async () => {
    // save_page's per-item probe, as its generic plan runs it. The change feed's index, as a plain
    // (portal, type, change_seq) index, once won this probe and made it scan the whole type per item.
    const explain = async (tx: { unsafe: (q: string) => Promise<Record<string, unknown>[]> }, query: string, types: string[]) => {
      const name = `content_plans_${process.pid}_${Math.random().toString(36).slice(2, 8)}`;
      await tx.unsafe(`prepare ${name}(${types.join(', ')}) as ${query}`);
      try {
        await tx.unsafe('set local plan_cache_mode = force_generic_plan');
        const rows = await tx.unsafe(`explain execute ${name}(${types.map(() => 'null').join(', ')})`);
        return rows.map((r) => String(r['QUERY PLAN'])).join('\n');
      } finally {
        await tx.unsafe(`deallocate ${name}`);
      }
    };
    await seedUsersAndPortals(db.sql, 9_001, 1);
    const ids = benchIds(9_001);
    const probe = `select s.id from public.hubspot_content s where s.portal_id = $1 and s.content_type = $2 and s.hubspot_id = $3 limit 1`;
    const feed = `select hubspot_id from public.hubspot_content where portal_id = $1 and content_type = $2 and change_seq > $3 and change_seq > 0
                  order by change_seq limit 100`;
    const rollback = new Error('rollback');
    await db.sql.begin(async (tx) => {
      // A type just filled, not analyzed yet (as a first sync leaves it; uncommitted, so no autovacuum sees it).
      await tx`insert into public.hubspot_content (portal_id, owner_id, content_type, hubspot_id, data, hubspot_updated_at)
        select ${ids.portalId}, ${ids.userId}, 'site_pages', g::text, jsonb_build_object('name', 'p' || g), now()
          from generate_series(1, 20000) g`;
      expect(await explain(tx, probe, ['uuid', 'text', 'text'])).toContain('hubspot_content_one_per_item');
      expect(await explain(tx, feed, ['uuid', 'text', 'bigint'])).toContain('hubspot_content_changes_idx');
      // The hazard, shown: the same index without its predicate takes the probe.
      await tx`drop index public.hubspot_content_changes_idx`;
      await tx`create index hubspot_content_changes_idx on public.hubspot_content (portal_id, content_type, change_seq)`;
      expect(await explain(tx, probe, ['uuid', 'text', 'text'])).toContain('hubspot_content_changes_idx');
      throw rollback;
    }).catch((e: unknown) => {
      if (e !== rollback) throw e;
    });
  });

  it('a probe near a change looks each item of its window up by id, never reading the whole type', async () => {
    // 300 portals of 20 site pages and one of 5,000: to a generic plan every portal's type looks small.
    // The window's check once read all 5,000 (an anti join over a scan of the type) on every probe.
    await seedUsersAndPortals(db.sql, 9_100, 301);
    for (let i = 9_100; i < 9_400; i++) await seedContent(db.sql, i, 'site_pages', 20);
    await seedContent(db.sql, 9_400, 'site_pages', 5_000);
    await db.sql`analyze public.hubspot_content`;
    const { portalId, userId } = benchIds(9_400);
    // Changed 10 s ago: a scheduled cycle asks for the overlap window.
    await db.sql`insert into public.sync_marks (portal_id, owner_id, content_type, high_water, archived_high_water)
                 values (${portalId}, ${userId}, 'site_pages', now() - interval '10 seconds', now() - interval '1 day')`;
    const stored = await db.sql`select data from public.hubspot_content where portal_id = ${portalId} and content_type = 'site_pages'
                                 order by hubspot_id desc limit 2`;
    const window = JSON.stringify({ total: 2, results: stored.map((r) => r.data) });
    await withPlanNotices('the probe window\'s plan', async (sql, notices) => {
      // 7 quiet cycles: past the 5 calls after which a cached plan may turn generic.
      for (let i = 0; i < 7; i++) {
        const run = await createRun(sql, { portalId, requestedBy: userId, kind: 'fetch', contentTypes: ['site_pages'], fetchMode: 'incremental', trigger: 'schedule' });
        const probe = await claimNextJob(sql, `plans-probe-${i}`, ['probe']);
        expect((probe?.checkpoint as { types: Record<string, { windowAfter?: string }> }).types.site_pages!.windowAfter).toBeDefined();
        notices.length = 0;
        expect(await completeProbeJob(sql, probe!, { site_pages: { window, archived: 0 } })).toBe(true);
        const decide = notices.find((n) => n.includes('select array_agg(t.content_type order by t.content_type)')) ?? 'no plan of the decision';
        expect(/Index Cond: .*hubspot_id = \(e\.value ->> 'id'/.test(decide) ? 'by id' : decide).toBe('by id');
        expect((await runOf(sql, run.runId!)).status).toBe('completed'); // quiet: the window's items are stored as listed
      }
    });
  }, 120_000);

  it('only functions called once per request are language sql: a sql function with a SET clause is planned again at every call', async () => {
    // Not inlined (SET search_path), a sql function's statement is parsed and planned at each
    // call, ~60 µs; plpgsql caches its plans per session. So the helpers the tick, create_run,
    // the schedule trigger and the claims call per cycle or per candidate are plpgsql (decision 0052).
    // private.record_cron_job is called once per cron job, by its migration.
    const rows = await db.sql`select p.oid::regproc::text as fn from pg_proc p join pg_namespace n on n.oid = p.pronamespace
                               join pg_language l on l.oid = p.prolang
                              where n.nspname in ('public', 'private') and l.lanname = 'sql' order by 1`;
    expect(rows.map((r) => r.fn)).toEqual([
      'hubspot_daily_reset_at', 'hubspot_portal_for_token_hash', 'hubspot_portal_limits', 'hubspot_rate_window',
      'operator_portals', 'private.access_removed_message', 'private.record_cron_job', 'queue_stats', 'stored_hubdb_rows',
      'worker_invocation_leases',
    ]);
  });

  it('the Operator view\'s narrow filters (failed, one portal, a time window, a quiet last hour) read an index, not the whole history', async () => {
    // 200,000 finished jobs over 200 portals, 30 failed. Half the rows rewritten, as a queue's
    // rows are while they run: the heap is no longer in creation order.
    const one = db.connect(1);
    await one`delete from public.runs`; // the jobs of the tests above (their portals are reused)
    const [seeded] = await one`select count(*)::int as n from public.portals where id = ${benchIds(200).portalId}`;
    if (seeded!.n === 0) await seedUsersAndPortals(one, 1, 200);
    await seedFinishedHistory(one, 200_000, 200);
    await one`update public.jobs set status = 'failed', last_error = 'boom' where id in (select id from public.jobs order by md5(id::text) limit 30)`;
    await one`update public.jobs set updated_at = updated_at where id % 2 = 0`;
    await one`vacuum analyze public.jobs`;
    const [mid] = await one`select created_at from public.jobs where id = 100000`;
    const since = mid!.created_at as Date;
    const until = new Date(since.getTime() + 3_600_000);
    const filters: [string, Omit<OperatorJobFilter, 'limit'>, string][] = [
      ['failed', { status: 'failed' }, 'jobs_failed_or_stopped_idx'],
      ['one portal', { portalId: benchIds(57).portalId }, 'jobs_portal_idx'],
      ['a window', { since, until }, 'jobs_created_idx'],
      ['the last hour (no job in it)', { since: new Date(Date.now() - 3_600_000) }, 'jobs_created_idx'],
    ];
    // auto_explain shows the plan the function really runs; 7 calls each, past the 5 after which
    // a cached plan may turn generic.
    await withPlanNotices('operator_jobs plans', async (sql, notices) => {
      const plans: Record<string, string> = {};
      const wanted: Record<string, string> = {};
      for (const [name, filter, index] of filters) {
        for (let i = 0; i < 7; i++) {
          notices.length = 0;
          await operatorJobs(sql, { ...filter, limit: 50 });
        }
        const plan = notices.find((n) => n.includes('join public.portals p')) ?? '';
        plans[name] = plan.includes(index) && !/Seq Scan on jobs/.test(plan) ? index : plan;
        wanted[name] = index;
      }
      expect(plans).toEqual(wanted);
    });
    // The window's answer is the newest 50 of it, by id.
    const got = await operatorJobs(db.sql, { since, until, limit: 50 });
    const want = await db.sql`select id::text from public.jobs where created_at >= ${since} and created_at < ${until} order by id desc limit 50`;
    expect(got.map((j) => j.id)).toEqual(want.map((r) => r.id));
  }, 120_000);
});

