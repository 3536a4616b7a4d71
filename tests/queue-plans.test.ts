// The functions that act for a lease holder reach the held job through the
// primary key. A plan that reads the partial index of running jobs whole and
// filters it by id would cost every completion a read of every running job
// (and complete_jobs one per job in the batch): it once did, because that small
// index always looks cheaper to the generic plan. auto_explain reports the
// nested statements' real plans to this session.
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
});
