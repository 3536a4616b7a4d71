// Sync (supabase/schemas/0270-0272, 0160): a portal's sync schedule written as
// its owner (RLS), what its last sync changed, its sync marks, and the change
// feed over hubspot_content.change_seq.
import type { ContentType } from '../content-types.ts';
import { asUser, type Sql, type UserClaims } from '../db.ts';

/** A sync schedule row (public.sync_schedules). */
export interface ScheduleRow {
  portal_id: string;
  content_types: ContentType[];
  incremental_every_minutes: number | null;
  full_every_minutes: number | null;
  overlap_seconds: number;
  paused: boolean;
  hubdb_sweep_every_minutes: number;
  next_incremental_at: Date | null;
  next_full_at: Date | null;
  last_scheduled_at: Date | null;
  updated_at: Date;
  [column: string]: unknown;
}

/** The columns the owner may set. */
export interface ScheduleFields {
  incremental_every_minutes?: number | null;
  full_every_minutes?: number | null;
  content_types?: ContentType[];
  overlap_seconds?: number;
  paused?: boolean;
  hubdb_sweep_every_minutes?: number;
}

/** Upserts the schedule as the user (RLS: the portal's owner only): updates the fields given, else inserts with them. Raises 23514 on a bad schedule. */
export async function upsertSyncSchedule(sql: Sql, claims: UserClaims, portalId: string, fields: ScheduleFields): Promise<ScheduleRow> {
  const rows = await asUser(sql, claims, async (tx) => {
    const updated = Object.keys(fields).length === 0 ? [] : await tx<ScheduleRow[]>`update public.sync_schedules set ${tx(fields as Record<string, unknown>)} where portal_id = ${portalId} returning *`;
    if (updated.length > 0) return updated;
    const existing = await tx<ScheduleRow[]>`select * from public.sync_schedules where portal_id = ${portalId}`;
    if (existing.length > 0) return existing;
    return tx<ScheduleRow[]>`insert into public.sync_schedules ${tx({ portal_id: portalId, ...fields } as Record<string, unknown>)} returning *`;
  });
  return rows[0]!;
}

/** Deletes the schedule as the user; false when there was none. */
export async function deleteSyncSchedule(sql: Sql, claims: UserClaims, portalId: string): Promise<boolean> {
  const rows = await asUser(sql, claims, (tx) => tx`delete from public.sync_schedules where portal_id = ${portalId} returning 1`);
  return rows.length > 0;
}

/** A portal's sync state as the user sees it: schedule, last finished fetch run (and its jobs' results), the run in flight, the marks. */
export interface SyncState {
  schedule: ScheduleRow | undefined;
  last: { id: string; fetch_mode: 'full' | 'incremental' | null; trigger: string; status: string; started_at: Date | null; finished_at: Date } | undefined;
  jobs: { content_type: ContentType; result: Record<string, unknown> | null }[];
  active: { id: string } | undefined;
  marks: { content_type: ContentType; high_water: Date; last_full_at: Date | null; last_incremental_at: Date | null }[];
}

/** The portal's sync state, read in one transaction as the user. */
export async function syncState(sql: Sql, claims: UserClaims, portalId: string): Promise<SyncState> {
  return asUser(sql, claims, async (tx) => {
    const [schedule] = await tx<ScheduleRow[]>`select * from public.sync_schedules where portal_id = ${portalId}`;
    const [last] = await tx<NonNullable<SyncState['last']>[]>`select id, fetch_mode, trigger, status, started_at, finished_at from public.runs
      where portal_id = ${portalId} and kind = 'fetch' and finished_at is not null and status <> 'stopped'
      order by finished_at desc limit 1`;
    const jobs = last ? await tx<SyncState['jobs']>`select content_type, result from public.jobs where run_id = ${last.id}` : [];
    const [active] = await tx<{ id: string }[]>`select id from public.runs where portal_id = ${portalId} and kind = 'fetch' and finished_at is null
      order by created_at desc limit 1`;
    const marks = await tx<SyncState['marks']>`select content_type, high_water, last_full_at, last_incremental_at from public.sync_marks
      where portal_id = ${portalId} order by content_type`;
    return { schedule, last, jobs: [...jobs], active, marks: [...marks] };
  });
}

/** One item of the change feed: `inserted` when its insert came after the reader's origin. */
export interface ChangeRow {
  hubspot_id: string;
  data: unknown;
  hubspot_updated_at: Date | null;
  deleted_at: Date | null;
  seq: string;
  inserted: boolean;
}

/**
 * Reads the feed as the user, in one transaction. `now`: each type's current
 * end (its last change_seq; absent when it has none). Else, per type in order,
 * the changes after `after[type]` until `limit` rows are read; `more` when
 * rows were left.
 */
export async function readChangeFeed(
  sql: Sql, claims: UserClaims, portalId: string, types: readonly ContentType[],
  q: { now: true } | { now: false; after: Record<string, string>; origin: Record<string, string>; limit: number },
): Promise<{ rows: { type: ContentType; row: ChangeRow }[]; ends: Record<string, string>; more: boolean }> {
  return asUser(sql, claims, async (tx) => {
    const out: { type: ContentType; row: ChangeRow }[] = [];
    const ends: Record<string, string> = {};
    let more = false;
    if (q.now) {
      for (const type of types) {
        const [last] = await tx<{ seq: string }[]>`select change_seq::text as seq from public.hubspot_content
          where portal_id = ${portalId} and content_type = ${type} and change_seq > 0 order by change_seq desc limit 1`;
        if (last) ends[type] = last.seq;
      }
      return { rows: out, ends, more };
    }
    for (const type of types) {
      const room = q.limit - out.length;
      if (room <= 0) {
        more = true;
        break;
      }
      const after = q.after[type] ?? '0';
      const origin = q.origin[type] ?? '0';
      // (`change_seq > 0`, always true, lets the planner use the partial hubspot_content_changes_idx.)
      const rows = await tx<ChangeRow[]>`select hubspot_id, data, hubspot_updated_at, deleted_at, change_seq::text as seq, inserted_seq > ${origin}::bigint as inserted
        from public.hubspot_content where portal_id = ${portalId} and content_type = ${type} and change_seq > ${after}::bigint and change_seq > 0
        order by change_seq limit ${room + 1}`;
      if (rows.length > room) more = true;
      for (const row of rows.slice(0, room)) out.push({ type, row });
    }
    return { rows: out, ends, more };
  });
}
