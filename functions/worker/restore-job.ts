// The restore job (docs/publish.md): rolls one content type of a publish run
// back, batch by batch, as the publish job applied it (applyBatches): each
// batch re-read, Postgres deciding per item (prepare_restore_batch: changed in
// HubSpot since our write → conflict, never overwritten; the pre-image's
// values already there; its own earlier restore; or to write now), the
// pre-image's values of the patched fields written live at once, HubSpot's
// answer recorded (record_restore_batch). A scheduled item not live yet has
// its draft written back instead (HubSpot cannot cancel a schedule: it then
// publishes the fields as they were); one its schedule put live meanwhile is
// restored live, as an applied one.
import { jobContentType, lost, type JobContext, type JobOutcome } from './job-context.ts';
import { completeJob } from '../../shared/sql/jobs.ts';
import { prepareRestoreBatch, publishJobContext, recordRestoreBatch } from '../../shared/sql/publish.ts';
import { writeClientOf } from './plan-job.ts';
import { applyBatches } from './publish-job.ts';
import { isVersioned, LIVE } from './publish-io.ts';

/** Runs a restore job until every applied item is restored or skipped (completed), released or lost. */
export async function processRestoreJob(ctx: JobContext): Promise<JobOutcome> {
  const type = jobContentType(ctx.job);
  const hs = await writeClientOf(ctx);
  const plan = await publishJobContext(ctx.sql, ctx.job);
  if (!plan) return lost('fenced off reading the plan');
  // A scheduled plan's drafts are written back one by one: its batches are as small as the schedule's were.
  const batchesAs = isVersioned(type) && plan.mode === 'schedule' ? { mode: plan.mode, publishAt: plan.publishAt } : undefined;
  const applied = await applyBatches(ctx, hs, type, { prepare: prepareRestoreBatch, record: recordRestoreBatch, writing: LIVE, batchesAs });
  if (applied) return applied;
  const completed = await completeJob(ctx.sql, ctx.job);
  return completed ? { kind: 'completed' } : lost('fenced off at completion');
}
