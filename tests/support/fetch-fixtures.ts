// Helpers for the fetch-job tests: a simulator portal connected in the
// database, content read back per type, and a "manual worker" that pages and
// saves exactly like functions/worker/fetch-job.ts does.
import { randomUUID } from 'node:crypto';
import { expect } from 'vitest';
import { parseFetchCheckpoint, type FetchCheckpoint } from '../../functions/worker/fetch-job.ts';
import { runWorkerInvocation, type InvocationSummary, type WorkerRuntime } from '../../functions/worker/invocation.ts';
import type { ContentType } from '../../shared/content-types.ts';
import type { Sql } from '../../shared/db.ts';
import { createHubSpotClient, type HubSpotContentClient, type RawPage } from '../../shared/hubspot/client.ts';
import { connectPrivateAppPortal } from '../../shared/hubspot/portal-connect.ts';
import { saveFetchedPageRaw, type SavedRawPage } from '../../shared/sql/fetch.ts';
import { type ClaimedJob } from '../../shared/sql/jobs.ts';
import { createRun } from '../../shared/sql/runs.ts';
import { tokenHash, type HubSpotSimulator, type PortalOptions, type RequestLogEntry } from '../../hubspot-sim/server.ts';
import { testTokenKeys } from '../../local/test-token-keys.ts';
import { createUser } from './database.ts';
import { jobsOfRun, runRow } from './queue-fixtures.ts';
import { setTimeout as sleep } from 'node:timers/promises';

/** The queue fixtures' row readers, under the names the fetch tests use. */
export { jobsOfRun as jobsOf, runRow as runOf };

export type Row = Record<string, unknown>;

export interface SimPortal {
  userId: string;
  /** Our portal id (uuid). */
  portalId: string;
  /** HubSpot's portal id (simulator). */
  hubspotPortalId: number;
  token: string;
}

let nextHubSpotPortalId = 70_000 + Math.floor(Math.random() * 10_000) * 10;

/** Adds a portal to the simulator and connects it for a new user (its token sealed under the test keys). */
export async function connectSimPortal(
  sql: Sql,
  sim: HubSpotSimulator,
  opts: Omit<PortalOptions, 'portalId' | 'token'> & { token?: string } = {},
): Promise<SimPortal> {
  const hubspotPortalId = nextHubSpotPortalId++;
  const token = opts.token ?? `pat-na1-${randomUUID()}`;
  sim.addPortal({ ...opts, portalId: hubspotPortalId, token });
  const userId = await createUser(sql);
  const portalId = await connectPrivateAppPortal(sql, testTokenKeys, { ownerId: userId, hubspotPortalId, name: `Sim portal ${hubspotPortalId}`, accessToken: token });
  return { userId, portalId, hubspotPortalId, token };
}

/** Creates a fetch run for the portal; every type must be created (no duplicates in flight). */
export async function startFetchRun(sql: Sql, p: SimPortal, types: readonly ContentType[], maxAttempts?: number): Promise<string> {
  const r = await createRun(sql, { portalId: p.portalId, requestedBy: p.userId, kind: 'fetch', contentTypes: types, maxAttempts: maxAttempts ?? null });
  expect([...r.createdTypes].sort()).toEqual([...types].sort());
  return r.runId!;
}

/** The simulator's live keys of a type, sorted (HubDB rows: `${tableId}:${rowId}`). */
export function simKeys(sim: HubSpotSimulator, p: SimPortal, type: ContentType): string[] {
  return sim.items(p.hubspotPortalId, type).map((i) => i.key).sort();
}

/** Our live (not deleted) hubspot ids of a type, sorted. */
export async function liveIds(sql: Sql, p: SimPortal, type: ContentType): Promise<string[]> {
  const rows = await sql`select hubspot_id from public.hubspot_content
                          where portal_id = ${p.portalId} and content_type = ${type} and deleted_at is null`;
  return rows.map((r) => r.hubspot_id as string).sort();
}

/** Every row of a type, deleted or not. */
export async function allContent(sql: Sql, p: SimPortal, type: ContentType): Promise<Row[]> {
  return [...(await sql`select hubspot_id, hubspot_updated_at, deleted_at, last_seen_job_id from public.hubspot_content
                         where portal_id = ${p.portalId} and content_type = ${type} order by hubspot_id`)];
}

/** Live ids equal the simulator's keys exactly, and updatedAt matches item by item. */
export async function expectSameAsSim(sql: Sql, sim: HubSpotSimulator, p: SimPortal, type: ContentType): Promise<void> {
  const expected = sim.items(p.hubspotPortalId, type);
  const rows = await sql`select hubspot_id, hubspot_updated_at from public.hubspot_content
                          where portal_id = ${p.portalId} and content_type = ${type} and deleted_at is null`;
  const got = rows.map((r) => r.hubspot_id as string).sort();
  expect(got.length, `${type}: live row count`).toBe(expected.length);
  expect(got, `${type}: live ids`).toEqual(expected.map((i) => i.key).sort());
  const updated = new Map(rows.map((r) => [r.hubspot_id as string, (r.hubspot_updated_at as Date | null)?.getTime() ?? null]));
  const mismatched = expected.filter((i) => updated.get(i.key) !== Date.parse(i.updatedAt)).map((i) => i.key);
  expect(mismatched, `${type}: hubspot_updated_at differs from the simulator`).toEqual([]);
}


export async function jobOfType(sql: Sql, runId: string, type: ContentType): Promise<Row> {
  const [row] = await sql`select * from public.jobs where run_id = ${runId} and content_type = ${type}`;
  if (!row) throw new Error(`no ${type} job in run ${runId}`);
  return { ...row };
}


export async function notificationOf(sql: Sql, runId: string): Promise<Row[]> {
  return [...(await sql`select * from public.notifications where run_id = ${runId}`)];
}

/**
 * Runs invocations one after another until the run is finished. Jobs waiting
 * out a retry backoff are made due at once when `makeRetriesDue` (tests must
 * not wait 10 s backoffs). Returns the summaries.
 */
export async function invokeUntilFinished(
  rt: WorkerRuntime,
  sql: Sql,
  runId: string,
  opts: { maxInvocations: number; makeRetriesDue?: boolean; onEach?: (s: InvocationSummary, i: number) => Promise<void> | void },
): Promise<InvocationSummary[]> {
  const summaries: InvocationSummary[] = [];
  for (let i = 0; i < opts.maxInvocations; i++) {
    const s = await runWorkerInvocation(rt, `fetch-test-${i}-${randomUUID().slice(0, 6)}`);
    summaries.push(s);
    await opts.onEach?.(s, i);
    const run = await runRow(sql, runId);
    if (run.finished_at) return summaries;
    if (opts.makeRetriesDue) {
      await sql`update public.jobs set run_after = now() where run_id = ${runId} and status = 'pending' and run_after > now()`;
    }
  }
  throw new Error(`run ${runId} not finished after ${opts.maxInvocations} invocations: ${JSON.stringify(summaries)}`);
}

/** A HubSpot client for the portal, as the worker builds it (no shared budget). */
export function manualClient(sim: HubSpotSimulator, p: SimPortal): HubSpotContentClient {
  return createHubSpotClient({ accessToken: p.token, basePath: sim.url, sleep: (ms) => sleep(Math.min(ms, 50)) });
}

/**
 * Plays the worker by hand: fetches one page from the checkpoint and saves it
 * (as text, parsed by Postgres) exactly like fetch-job.ts. Returns the page,
 * the ids it held, the checkpoint now stored and the counts (null when fenced off).
 */
export async function fetchAndSavePage(
  sql: Sql,
  client: HubSpotContentClient,
  job: Pick<ClaimedJob, 'id' | 'fencingToken' | 'contentType'>,
  checkpoint: FetchCheckpoint,
): Promise<{ page: RawPage; ids: string[]; next: FetchCheckpoint; counts: SavedRawPage | null }> {
  const page = await client.fetchRawPage(job.contentType!, checkpoint.after);
  const counts = await saveFetchedPageRaw(sql, job, page.body, page.context);
  const next = counts ? parseFetchCheckpoint(counts.checkpoint) : checkpoint;
  return { page, ids: rawPageIds(page), next, counts };
}

/** The item ids a raw page holds, as the database keys them (the test parses; the worker never does). */
export function rawPageIds(page: RawPage): string[] {
  const results = (JSON.parse(page.body) as { results: { id: string | number }[] }).results;
  return results.map((r) => (page.context?.tableId ? `${page.context.tableId}:${r.id}` : String(r.id)));
}

/** Requests made with the portal's token to one list path (e.g. /cms/blogs/2026-03/posts), in arrival order. */
export function listRequests(sim: HubSpotSimulator, p: SimPortal, path: string): RequestLogEntry[] {
  const hash = tokenHash(p.token);
  return sim.requestLog().filter((e) => e.tokenHash === hash && e.path.replace(/\/+$/, '') === path);
}

/** Polls `check` until it is true (or throws after `timeoutMs`). */
export async function waitUntil(check: () => Promise<boolean> | boolean, timeoutMs: number, what: string, everyMs = 10): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(everyMs);
  }
}

/** Stops every unfinished run so the next test starts with an empty queue. */
export async function stopAllRuns(sql: Sql): Promise<void> {
  await sql`select public.stop_run(r.id) from public.runs r where r.finished_at is null`;
}

export { sleep };
