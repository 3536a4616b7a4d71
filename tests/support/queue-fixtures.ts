// Small helpers for the queue-core tests: seeding runs, reading raw rows,
// simulating time passing (back-dating) and catching SQL errors.
import { expect } from 'vitest';
import type { ContentType, RunKind } from '../../shared/content-types.ts';
import type { Sql } from '../../shared/db.ts';
import { type ClaimedJob } from '../../shared/sql/jobs.ts';
import { createRun } from '../../shared/sql/runs.ts';
import { createUserWithPortal } from './database.ts';
import { setTimeout as sleep } from 'node:timers/promises';

export type Row = Record<string, unknown>;

/** A user with a portal and one run of the given types (all created). */
export async function seedRun(
  sql: Sql,
  opts: { kind?: RunKind; types?: readonly ContentType[]; maxAttempts?: number; leaseSeconds?: number; totals?: number[] } = {},
) {
  const { userId, portalId, hubspotPortalId } = await createUserWithPortal(sql);
  const types = opts.types ?? ['site_pages'];
  const r = await createRun(sql, {
    portalId,
    requestedBy: userId,
    kind: opts.kind ?? 'fetch',
    contentTypes: types,
    maxAttempts: opts.maxAttempts ?? null,
    leaseSeconds: opts.leaseSeconds ?? null,
    totals: opts.totals ?? null,
  });
  expect(r.createdTypes.sort()).toEqual([...types].sort());
  return { userId, portalId, hubspotPortalId, runId: r.runId!, types };
}

/** Settles every unfinished run (stop_run), so each test starts with an empty queue. */
export async function drainQueue(sql: Sql): Promise<void> {
  await sql`select public.stop_run(r.id) from public.runs r where r.finished_at is null`;
  const [left] = await sql`select count(*)::int as n from public.jobs where status in ('pending', 'running')`;
  expect(left!.n).toBe(0);
}

/** The full job row as stored. */
export async function jobRow(sql: Sql, id: string | number | bigint): Promise<Row> {
  const [row] = await sql`select * from public.jobs where id = ${String(id)}`;
  if (!row) throw new Error(`job ${id} not found`);
  return { ...row };
}

export async function runRow(sql: Sql, id: string): Promise<Row> {
  const [row] = await sql`select * from public.runs where id = ${id}`;
  if (!row) throw new Error(`run ${id} not found`);
  return { ...row };
}

export async function jobsOfRun(sql: Sql, runId: string): Promise<Row[]> {
  return [...(await sql`select * from public.jobs where run_id = ${runId} order by id`)];
}

export async function notificationsOf(sql: Sql, runId: string): Promise<Row[]> {
  return [...(await sql`select * from public.notifications where run_id = ${runId} order by id`)];
}

/** Every content row of a portal, in a stable order. */
export async function contentRows(sql: Sql, portalId: string): Promise<Row[]> {
  return [...(await sql`select * from public.hubspot_content where portal_id = ${portalId} order by content_type, hubspot_id`)];
}

/** Simulates the holder dying: its lease is now in the past. */
export async function expireLease(sql: Sql, jobId: string): Promise<void> {
  const r = await sql`update public.jobs set lease_expires_at = now() - interval '1 second'
                       where id = ${jobId} and status = 'running'`;
  expect(r.count).toBe(1);
}

/** Simulates the backoff having elapsed. */
export async function makeDue(sql: Sql, jobId: string): Promise<void> {
  const r = await sql`update public.jobs set run_after = now() - interval '1 second' where id = ${jobId} and status = 'pending'`;
  expect(r.count).toBe(1);
}

/** Row counts of every table the queue writes. */
export async function tableCounts(sql: Sql): Promise<Record<string, number>> {
  const [row] = await sql`select
      (select count(*)::int from auth.users) as users,
      (select count(*)::int from public.portals) as portals,
      (select count(*)::int from private.portal_credentials) as credentials,
      (select count(*)::int from public.runs) as runs,
      (select count(*)::int from public.jobs) as jobs,
      (select count(*)::int from public.hubspot_content) as content,
      (select count(*)::int from public.notifications) as notifications,
      (select count(*)::int from private.hubspot_request_budgets) as budgets`;
  return { ...row } as Record<string, number>;
}

/** A stable digest of every queue table (to prove that nothing changed). */
export async function databaseDigest(sql: Sql, opts: { budgets?: boolean } = {}): Promise<string> {
  // `budgets: false` leaves out the HubSpot request budgets, which legitimately
  // move whenever HubSpot is asked anything (a rejected request may still have asked).
  const budgets = opts.budgets === false
    ? sql`''`
    : sql`(select string_agg(t::text, ',' order by t.hubspot_portal_id) from private.hubspot_request_budgets t)`;
  const [row] = await sql`select md5(concat_ws('|',
      (select string_agg(t::text, ',' order by t.id) from public.portals t),
      (select string_agg(t::text, ',' order by t.portal_id) from private.portal_credentials t),
      (select string_agg(t::text, ',' order by t.id) from public.runs t),
      (select string_agg(t::text, ',' order by t.id) from public.jobs t),
      (select string_agg(t::text, ',' order by t.id) from public.hubspot_content t),
      (select string_agg(t::text, ',' order by t.id) from public.notifications t),
      ${budgets})) as digest`;
  return row!.digest as string;
}

export interface PgErrorInfo {
  code: string;
  message: string;
}

/** Runs `fn`, expects it to throw a Postgres error and returns its SQLSTATE and message. */
export async function pgError(fn: () => Promise<unknown>): Promise<PgErrorInfo> {
  try {
    await fn();
  } catch (e) {
    const err = e as { code?: string; message?: string };
    if (typeof err.code !== 'string') throw e;
    return { code: err.code, message: err.message ?? '' };
  }
  throw new Error('expected a SQL error, but the call succeeded');
}

/** A claimed job reduced to what the holder functions need. */
export type Held = Pick<ClaimedJob, 'id' | 'fencingToken'>;

export { sleep };
