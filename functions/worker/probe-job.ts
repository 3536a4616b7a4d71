// The probe job (docs/decisions/0046): the first job of a scheduled run the
// tick made, or of one a failed schedule probe handed over. It asks HubSpot
// whether anything changed since the types' marks (./change-questions.ts, the
// questions a schedule probe asks too), then reports the answers in one call
// that adds the changed types' fetch jobs to its run (with the HubDB tables
// list, so they read it no more) and completes the probe. It keeps no
// checkpoint: cut off, it asks again.
import { completeProbeJob } from '../../shared/sql/fetch.ts';
import { askHubSpot, parseProbeCheckpoint, type ProbeReport } from './change-questions.ts';
import { hubspotWaitOutcome } from './fetch-job.ts';
import { lost, releaseOrLost, type JobContext, type JobOutcome } from './job-context.ts';

/** Runs a probe job: HubSpot's answers, then one call that decides and completes. */
export async function processProbeJob(ctx: JobContext): Promise<JobOutcome> {
  const { job, signal } = ctx;
  const questions = parseProbeCheckpoint(job.checkpoint);
  const hubspot = await ctx.hubspotForPortal(job.portalId);
  const stop = ctx.outOfBudget({});
  if (stop) return releaseOrLost(ctx, stop);
  let report: ProbeReport;
  try {
    report = await askHubSpot(hubspot, questions, signal);
  } catch (e) {
    return hubspotWaitOutcome(ctx, e);
  }
  if (signal.aborted) return lost('job lease lost');
  const completed = await completeProbeJob(ctx.sql, job, report.answers, report.tablesPages);
  return completed ? { kind: 'completed' } : lost('fenced off at completion');
}
