// Notification rules (private.run_notifies, docs/sync.md#notifications): a run
// a person started always notifies; a scheduled run notifies only when it
// failed (failed / partially_failed) and the portal's previous finished
// scheduled run did not: its first failure after successes. Quiet and changed
// scheduled successes, and repeated scheduled failures, send nothing. Through
// every settling path: complete_job, complete_jobs, fail_job, the recount
// (stop_run, settle_stuck_runs) and disconnect_portal.
import { beforeEach, describe, expect, it } from 'vitest';
import type { ContentType } from '../shared/content-types.ts';
import { claimJobs, completeJob, completeJobs, failJob } from '../shared/sql/jobs.ts';
import { createRun, stopRun } from '../shared/sql/runs.ts';
import { createUserWithPortal, useTestDatabase } from './support/database.ts';
import { drainQueue, expireLease } from './support/queue-fixtures.ts';

const db = useTestDatabase();
const TYPES: ContentType[] = ['site_pages', 'blog_posts'];

type Portal = { userId: string; portalId: string };
type End = 'quiet' | 'changed' | 'partial' | 'failed';

async function start(p: Portal, trigger: 'user' | 'schedule'): Promise<string> {
  const r = await createRun(db.sql, { portalId: p.portalId, requestedBy: p.userId, kind: 'fetch', contentTypes: TYPES, fetchMode: 'incremental', trigger });
  expect(r.createdTypes.sort()).toEqual([...TYPES].sort());
  return r.runId!;
}

/** A fetch cycle of the portal, run to its end by hand; returns its run id. */
async function cycle(p: Portal, trigger: 'user' | 'schedule', end: End): Promise<string> {
  const runId = await start(p, trigger);
  const jobs = await claimJobs(db.sql, 'rules', TYPES.length);
  expect(jobs).toHaveLength(TYPES.length);
  for (const [i, j] of jobs.entries()) {
    if (end === 'failed' || (end === 'partial' && i === 0)) expect(await failJob(db.sql, j, `boom ${i}`, false)).toBe('failed');
    else expect(await completeJob(db.sql, j, { mode: 'incremental', fetched: 3, added: end === 'changed' ? 1 : 0, updated: 0, deleted: 0 })).toBe(true);
  }
  return runId;
}

async function notified(runId: string): Promise<string[]> {
  return (await db.sql`select kind from public.notifications where run_id = ${runId}`).map((n) => n.kind as string);
}

beforeEach(async () => {
  await drainQueue(db.sql);
});

describe('notification rules', () => {
  it('a run a person started always notifies: succeeded, changed nothing, failed, or stopped', async () => {
    const p = await createUserWithPortal(db.sql);
    expect(await notified(await cycle(p, 'user', 'quiet'))).toEqual(['run_completed']);
    expect(await notified(await cycle(p, 'user', 'changed'))).toEqual(['run_completed']);
    expect(await notified(await cycle(p, 'user', 'failed'))).toEqual(['run_failed']);
    expect(await notified(await cycle(p, 'user', 'failed'))).toEqual(['run_failed']);
    const stopped = await start(p, 'user');
    expect(await stopRun(db.sql, stopped)).toBe(true);
    expect(await notified(stopped)).toEqual(['run_stopped']);
  });

  it('a scheduled success sends none, quiet or with changes (the change feed tells apps)', async () => {
    const p = await createUserWithPortal(db.sql);
    expect(await notified(await cycle(p, 'schedule', 'quiet'))).toEqual([]);
    expect(await notified(await cycle(p, 'schedule', 'changed'))).toEqual([]);
    expect(await notified(await cycle(p, 'schedule', 'quiet'))).toEqual([]);
  });

  it('a portal\'s first scheduled failure after successes notifies; the failures after it do not, until a success', async () => {
    const p = await createUserWithPortal(db.sql);
    await cycle(p, 'schedule', 'quiet');
    const first = await cycle(p, 'schedule', 'partial');
    const [note] = await db.sql`select kind, message from public.notifications where run_id = ${first}`;
    expect(note).toMatchObject({ kind: 'run_partially_failed' });
    expect(note!.message).toContain('First error: boom 0');
    expect(await notified(await cycle(p, 'schedule', 'failed'))).toEqual([]);
    expect(await notified(await cycle(p, 'schedule', 'partial'))).toEqual([]);
    // A run a person started in between changes nothing of the scheduled rule.
    expect(await notified(await cycle(p, 'user', 'quiet'))).toEqual(['run_completed']);
    expect(await notified(await cycle(p, 'schedule', 'failed'))).toEqual([]);
    await cycle(p, 'schedule', 'changed');
    expect(await notified(await cycle(p, 'schedule', 'failed'))).toEqual(['run_failed']);
  });

  it('a portal\'s very first scheduled run notifies when it fails; another portal\'s failures are its own', async () => {
    const a = await createUserWithPortal(db.sql);
    const b = await createUserWithPortal(db.sql);
    expect(await notified(await cycle(a, 'schedule', 'failed'))).toEqual(['run_failed']);
    expect(await notified(await cycle(b, 'schedule', 'failed'))).toEqual(['run_failed']);
    expect(await notified(await cycle(a, 'schedule', 'failed'))).toEqual([]);
  });

  it('hold on every settling path: complete_jobs, a stopped scheduled run, settle_stuck_runs and disconnect_portal', async () => {
    const p = await createUserWithPortal(db.sql);
    // complete_jobs: a scheduled success, none.
    const batch = await start(p, 'schedule');
    expect(await completeJobs(db.sql, await claimJobs(db.sql, 'rules', 2))).toBe(2);
    expect(await notified(batch)).toEqual([]);
    // A scheduled run a person stopped: none (they stopped it).
    const stopped = await start(p, 'schedule');
    expect(await stopRun(db.sql, stopped)).toBe(true);
    expect(await notified(stopped)).toEqual([]);
    // The job lease of the last attempt expired: failed by the recount, the first failure after a success.
    const lost = await createRun(db.sql, {
      portalId: p.portalId, requestedBy: p.userId, kind: 'fetch', contentTypes: TYPES, fetchMode: 'incremental', trigger: 'schedule', maxAttempts: 1,
    });
    for (const j of await claimJobs(db.sql, 'rules', 2)) await expireLease(db.sql, j.id);
    await db.sql`select public.settle_stuck_runs()`;
    expect(await notified(lost.runId!)).toEqual(['run_failed']);
    // HubSpot access removed during a scheduled run: a failure after a failure, none.
    const cut = await start(p, 'schedule');
    await db.sql`select public.disconnect_portal(${p.portalId}, 'token revoked')`;
    const [run] = await db.sql`select status from public.runs where id = ${cut}`;
    expect(run!.status).toBe('failed');
    expect(await notified(cut)).toEqual([]);
  });
});
