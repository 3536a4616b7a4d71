// The functions that act for a lease holder reach the held job through the
// primary key. A plan that reads the partial index of running jobs whole and
// filters it by id would cost every completion a read of every running job
// (and complete_jobs one per job in the batch): it once did, because that small
// index always looks cheaper to the generic plan. auto_explain reports the
// nested statements' real plans to this session. And the index of leases
// serves lease queries only: scanned whole for a portal's running jobs, it
// once turned batch claims 10-30 times slower for the rest of a drain.
import { describe, expect, it } from 'vitest';
import { holderPlans } from '../bench/scenarios/throughput-statements.ts';
import { seedPendingJobs, seedUsersAndPortals } from '../bench/lib/seed.ts';
import { claimJobs } from '../shared/queue.ts';
import { useTestDatabase } from './support/database.ts';

const db = useTestDatabase();

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
});
