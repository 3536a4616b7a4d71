// Typed calls of the test-only SQL functions (schema queue_test, created by
// scripts/sql/queue-test-helpers.sql after the migrations, never by a
// migration): what the tests and the benchmarks call that the product does not.
import type { JobKind } from '../../shared/content-types.ts';
import type { Sql } from '../../shared/db.ts';
import { type PageCounts } from '../../shared/sql/fetch.ts';
import { toClaimedJob, type ClaimedJob } from '../../shared/sql/jobs.ts';

/** Completes the job and claims the next in one transaction. */
export async function completeJobAndClaimNext(
  sql: Sql,
  job: Pick<ClaimedJob, 'id' | 'fencingToken'>,
  workerId: string,
  kinds: readonly JobKind[] | null = null,
): Promise<{ completed: boolean; next: ClaimedJob | null }> {
  const [row] = await sql`select * from queue_test.complete_job_and_claim_next(${job.id}, ${job.fencingToken}, ${workerId}, null, ${kinds as string[] | null})`;
  if (!row) throw new Error('complete_job_and_claim_next returned no row');
  return { completed: row.completed === true, next: row.id == null ? null : toClaimedJob(row) };
}

/** One item as the JS-shaped page path takes it. */
export interface FetchedItem {
  id: string;
  updatedAt: string | null;
  data: Record<string, unknown>;
}

/** Writes one page of items shaped in JS atomically for the lease holder; null when fenced off (nothing written). */
export async function saveFetchedPage(
  sql: Sql,
  job: Pick<ClaimedJob, 'id' | 'fencingToken'>,
  items: readonly FetchedItem[],
  checkpoint: unknown,
  progressTotal: number | null = null,
): Promise<PageCounts | null> {
  const [row] = await sql`select queue_test.save_fetched_page(${job.id}, ${job.fencingToken}, ${sql.json(items as never)},
    ${sql.json(checkpoint as never)}, ${progressTotal}) as counts`;
  return (row?.counts as PageCounts | null) ?? null;
}
