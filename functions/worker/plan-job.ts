// The plan job (docs/publish.md): reads one content type's items of a plan
// from HubSpot in batches (publish-io.ts: one batch/read of up to 100, HubDB
// rows per table, redirects one GET each) and hands each answer, as text, to
// Postgres (record_plan_batch), which classifies the items: ready, conflict,
// unchanged, missing or invalid. Nothing is written to HubSpot. Before each
// batch it asks the invocation's budget; out of it, the job is released (the
// items already classified stay so: the next claim reads the rest).
import { completeJob } from '../../shared/sql/jobs.ts';
import { nextPublishItems, recordPlanBatch } from '../../shared/sql/publish.ts';
import type { HubSpotWriteClient } from '../../shared/hubspot/writes.ts';
import { hubspotWaitOutcome, PageCost } from './fetch-job.ts';
import { jobContentType, lost, PermanentJobError, releaseOrLost, type JobContext, type JobOutcome } from './job-context.ts';
import { batchSize, readItems } from './publish-io.ts';

/** The job's HubSpot write client (the invocation always gives one). */
export async function writeClientOf(ctx: JobContext): Promise<HubSpotWriteClient> {
  if (!ctx.hubspotWritesForPortal) throw new PermanentJobError(`A ${ctx.job.kind} job needs a HubSpot write client.`);
  return ctx.hubspotWritesForPortal(ctx.job.portalId);
}

/** Runs a plan job until every item is classified (completed), out of budget (released) or fenced off (lost). */
export async function processPlanJob(ctx: JobContext): Promise<JobOutcome> {
  const { sql, job, signal } = ctx;
  const type = jobContentType(job);
  const hs = await writeClientOf(ctx);
  const cost = new PageCost();
  let batches = 0;
  for (;;) {
    if (signal.aborted) return lost('job lease lost');
    const stop = ctx.outOfBudget(cost.next());
    if (stop) return releaseOrLost(ctx, stop);
    const wall0 = ctx.now();
    const cpu0 = ctx.cpuMs();
    const items = await nextPublishItems(sql, job, batchSize(type, null));
    if (items === null) return lost('fenced off reading the next items');
    if (items.length === 0) break;
    let body: string;
    try {
      body = (await readItems(hs, type, items.map((i) => i.hubspotId), signal)).body;
    } catch (e) {
      return hubspotWaitOutcome(ctx, e);
    }
    if (signal.aborted) return lost('job lease lost');
    const counts = await recordPlanBatch(sql, job, items.map((i) => i.itemId), body);
    if (counts === null) return lost('fenced off recording a plan batch');
    cost.record(ctx.now() - wall0, ctx.cpuMs() - cpu0);
    batches++;
  }
  ctx.log.info('plan_batches_done', { batches });
  const completed = await completeJob(sql, job, { batches });
  return completed ? { kind: 'completed' } : lost('fenced off at completion');
}
