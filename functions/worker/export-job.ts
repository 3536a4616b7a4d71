// The export job: streams one content type's live items from Postgres into a
// CSV file through a sink, page by page with heartbeats. A restarted attempt
// starts the file again; only a complete file is ever published.
import type { ContentType } from '../../shared/content-types.ts';
import { completeJob, heartbeatJob, releaseJob } from '../../shared/queue.ts';
import { csvRow } from './csv.ts';
import { EXPORT_COLUMNS, exportHeader } from './export-columns.ts';
import type { JobContext, JobOutcome } from './job-context.ts';

const PAGE_ROWS = 500;

/**
 * Path of an export file: one folder per owner and run, one name per attempt
 * (its fencing token). A stale attempt that publishes late can never replace
 * the file of the attempt that completed the job: only that one's location is
 * recorded in the job's result.
 */
export function exportObjectPath(ownerId: string, runId: string, type: ContentType, fencingToken: string): string {
  return `${ownerId}/${runId}/${type}-${fencingToken}.csv`;
}

/** Runs an export job to a committed file, or releases/aborts it. */
export async function processExportJob(ctx: JobContext): Promise<JobOutcome> {
  const { sql, job, signal } = ctx;
  const ownerId = job.ownerId ?? (await sql`select owner_id from public.jobs where id = ${job.id}`)[0]?.owner_id;
  const writer = await ctx.exportSink.open(exportObjectPath(String(ownerId), job.runId, job.contentType, job.fencingToken), job.fencingToken);
  let committed = false;
  // `data -> 'name', data -> 'slug', ...`: one projection per exported field, in header order.
  const fields = EXPORT_COLUMNS[job.contentType]
    .map((c) => sql`data -> ${c}`)
    .reduce((list, field) => sql`${list}, ${field}`);
  try {
    await writer.write(csvRow(exportHeader(job.contentType)));
    let afterId = '0';
    let rows = 0;
    for (;;) {
      if (signal.aborted) return { kind: 'lost', reason: 'lease lost' };
      if (ctx.timeLeft() < 3_000) {
        const released = await releaseJob(sql, job, { done: 0 });
        return released ? { kind: 'released', reason: 'time budget' } : { kind: 'lost', reason: 'lease lost before release' };
      }
      // Only the exported fields leave Postgres (bodies and widgets stay behind): memory stays small.
      const page = await sql`
        select id, hubspot_id, hubspot_updated_at, jsonb_build_array(${fields}) as vals
          from public.hubspot_content
         where portal_id = ${job.portalId} and content_type = ${job.contentType} and deleted_at is null and id > ${afterId}
         order by id
         limit ${PAGE_ROWS}`;
      if (page.length === 0) break;
      let chunk = '';
      for (const r of page) {
        chunk += csvRow([r.hubspot_id, r.hubspot_updated_at, ...(r.vals as unknown[])]);
      }
      await writer.write(chunk);
      rows += page.length;
      afterId = String(page[page.length - 1]!.id);
      if (!(await heartbeatJob(sql, job, { done: rows }))) return { kind: 'lost', reason: 'heartbeat refused' };
    }
    const file = await writer.commit();
    committed = true;
    const done = await completeJob(sql, job, { rows, bytes: file.bytes, location: file.location, url: file.url ?? null });
    return done ? { kind: 'completed' } : { kind: 'lost', reason: 'fenced off at completion' };
  } finally {
    if (!committed) await writer.abort();
  }
}
