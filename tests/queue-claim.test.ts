// Claiming: many real connections at once never claim a job twice.
import { beforeAll, describe, expect, it } from 'vitest';
import { CONTENT_TYPES } from '../shared/content-types.ts';
import { claimNextJob, completeJob, type ClaimedJob } from '../shared/sql/jobs.ts';
import { createRun } from '../shared/sql/runs.ts';
import { createUserWithPortal, useTestDatabase } from './support/database.ts';

const db = useTestDatabase();

/** These tests hold more than four fetch jobs of one portal at once: lift the portal cap (tested in queue-fairness). */
async function liftFetchCap() {
  await db.sql`update private.job_kinds set portal_cap_max = null where kind = 'fetch'`;
}
beforeAll(liftFetchCap);

/** Creates `portals` portals with one fetch run of all eight types each. */
async function seedJobs(portals: number): Promise<number> {
  let jobs = 0;
  for (let i = 0; i < portals; i++) {
    const { userId, portalId } = await createUserWithPortal(db.sql);
    const r = await createRun(db.sql, { portalId, requestedBy: userId, kind: 'fetch', contentTypes: CONTENT_TYPES });
    jobs += r.createdTypes.length;
  }
  return jobs;
}

describe('claim_next_job', () => {
  it('16 connections claiming 5,000 jobs at once claim each exactly once', async () => {
    const total = await seedJobs(625); // 625 portals x 8 types = 5,000 jobs
    expect(total).toBe(5000);
    const claims: ClaimedJob[] = [];
    const workers = Array.from({ length: 16 }, (_, w) => {
      const sql = db.connect(1);
      return (async () => {
        for (;;) {
          const job = await claimNextJob(sql, `worker-${w}`);
          if (!job) return;
          claims.push(job);
        }
      })();
    });
    await Promise.all(workers);
    expect(claims.length).toBe(5000);
    expect(new Set(claims.map((c) => c.id)).size).toBe(5000);
    const [row] = await db.sql`select count(*)::int as n, count(distinct worker_id)::int as workers from public.jobs where status = 'running' and attempts = 1`;
    expect(row!.n).toBe(5000);
    expect(row!.workers).toBeGreaterThan(1);
  });

  it('returns nothing when no job is claimable, and completes only for the holder', async () => {
    const none = await claimNextJob(db.sql, 'idle-worker', ['export']);
    expect(none).toBeNull();
    const [job] = await db.sql`select id, fencing_token from public.jobs where status = 'running' limit 1`;
    expect(await completeJob(db.sql, { id: String(job!.id), fencingToken: '999999999' })).toBe(false);
    expect(await completeJob(db.sql, { id: String(job!.id), fencingToken: String(job!.fencing_token) })).toBe(true);
  });
});
