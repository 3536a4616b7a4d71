// Publish jobs' reads of their own plan (supabase/schemas/0283, 0285) that the
// holder calls of shared/sql/publish.ts do not return: the plan's write mode,
// the time window its written items' foreign edits could have landed in, and
// the overwritten items still without a revision. Reads only (the writes they
// lead to are fenced holder calls); the worker's. docs/publish.md.
import type { Sql } from '../db.ts';
import type { ClaimedJob } from './jobs.ts';
import type { PublishMode } from './publish.ts';

type Job = Pick<ClaimedJob, 'runId' | 'contentType'>;

/** The write mode of the plan a publish job applies (mode `schedule`: with its time); null when the run has no plan. */
export async function publishJobMode(sql: Sql, job: Pick<ClaimedJob, 'runId'>): Promise<{ mode: PublishMode; publishAt: Date | null } | null> {
  const [row] = await sql`select p.mode, p.publish_at from public.publish_plans p where p.publish_run_id = ${job.runId}`;
  return row ? { mode: row.mode as PublishMode, publishAt: (row.publish_at as Date | null) ?? null } : null;
}

/**
 * Where a publish job's window events can be: from the earliest of its written
 * items' starts to the latest write (HubSpot's clock). An item's window runs
 * from its re-read to our write; the re-read is not on HubSpot's clock, so it
 * starts at the later of the pre-image's update time and our write's less
 * `boundSeconds` (the longest a re-read and its write may be apart). Null when
 * the job has no applied write yet.
 */
export async function publishJobWindow(sql: Sql, job: Job, boundSeconds: number): Promise<{ after: Date; before: Date; items: number } | null> {
  const [row] = await sql`
    select min(greatest(i.pre_updated_at, i.applied_updated_at - make_interval(secs => ${boundSeconds}))) as after_at,
           max(i.applied_updated_at) as before_at, count(*)::int as items
      from public.publish_plans p
      join public.publish_items i on i.plan_id = p.id and i.content_type = ${job.contentType}
     where p.publish_run_id = ${job.runId} and i.writes >= 1 and i.outcome in ('applied', 'overwritten')`;
  if (!row || row.items === 0 || row.after_at === null) return null;
  return { after: row.after_at as Date, before: row.before_at as Date, items: row.items as number };
}

/** An item of the job found overwritten in its window, its revision not yet recorded. */
export interface OverwrittenItem {
  itemId: string;
  hubspotId: string;
  preUpdatedAt: Date;
  appliedUpdatedAt: Date;
}

/** The job's overwritten items without a revision to restore, in id order. */
export async function overwrittenItems(sql: Sql, job: Job): Promise<OverwrittenItem[]> {
  const rows = await sql`
    select i.id::text as item_id, i.hubspot_id, i.pre_updated_at, i.applied_updated_at
      from public.publish_plans p
      join public.publish_items i on i.plan_id = p.id and i.content_type = ${job.contentType}
     where p.publish_run_id = ${job.runId} and i.outcome = 'overwritten' and i.overwritten_revision_id is null
     order by i.id`;
  return rows.map((r) => ({
    itemId: r.item_id as string, hubspotId: r.hubspot_id as string,
    preUpdatedAt: r.pre_updated_at as Date, appliedUpdatedAt: r.applied_updated_at as Date,
  }));
}
