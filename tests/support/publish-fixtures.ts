// Helpers for the publish tests: HubSpot-shaped items and the CMS v3 batch
// answers (200, and 207 with errors per input) a test writes as JSON text, a
// portal's copy stored through the real fetch path, and the plan, publish and
// restore jobs driven through their real holder calls.
import { expect } from 'vitest';
import type { ContentType } from '../../shared/content-types.ts';
import { asUser, type Sql } from '../../shared/db.ts';
import { completeFetchJob, saveFetchedPageRaw } from '../../shared/sql/fetch.ts';
import { claimNextJob, completeJob, type ClaimedJob } from '../../shared/sql/jobs.ts';
import {
  createPublishPlan, type CreatePlanInput, nextPublishItems, preparePublishBatch, prepareRestoreBatch, recordPlanBatch, recordPublishBatch, recordRestoreBatch,
} from '../../shared/sql/publish.ts';
import { createRun } from '../../shared/sql/runs.ts';

export type Item = Record<string, unknown> & { id: string };

/** HubSpot's update-time field of a type: HubDB says updatedAt, the CMS types updated. */
export const updatedKey = (type: ContentType): 'updated' | 'updatedAt' => (type.startsWith('hubdb_') ? 'updatedAt' : 'updated');

/** A site or landing page (or a post: blog fields merged in) as the CMS v3 API answers it. */
export function cmsItem(id: string, updated: string, fields: Record<string, unknown> = {}): Item {
  return {
    id, name: `Page ${id}`, slug: `page-${id}`, htmlTitle: `Title ${id}`, metaDescription: `About ${id}`, authorName: 'Ada',
    url: `https://example.test/page-${id}`, state: 'PUBLISHED', language: 'en', domain: 'example.test',
    publishDate: '2025-06-01T00:00:00.000Z', created: '2025-06-01T00:00:00.000Z', updated, archivedAt: '1970-01-01T00:00:00Z',
    ...fields,
  };
}

/** HubSpot's side of one content type's batch endpoints, as the CMS v3 specs answer them: items by id. */
export class HubSpotItems {
  readonly items = new Map<string, Item>();
  private clock = Date.parse('2026-02-01T00:00:00.000Z');
  constructor(readonly type: ContentType) {}

  /** The next update time (each write moves it by a second). */
  tick(): string {
    this.clock += 1000;
    return new Date(this.clock).toISOString();
  }

  put(...items: Item[]): this {
    for (const i of items) this.items.set(i.id, structuredClone(i));
    return this;
  }

  get(id: string): Item {
    const item = this.items.get(id);
    if (!item) throw new Error(`no item ${id}`);
    return item;
  }

  /** Someone edits the item in HubSpot: the fields change and its update time moves. */
  edit(id: string, fields: Record<string, unknown>): Item {
    const item = this.get(id);
    Object.assign(item, fields, { [updatedKey(this.type)]: this.tick() });
    return item;
  }

  /** `POST …/batch/read`: 200, or 207 with an OBJECT_NOT_FOUND error naming the ids it does not have. */
  read(ids: readonly string[]): { status: number; body: string } {
    const results = ids.filter((id) => this.items.has(id)).map((id) => this.items.get(id)!);
    const missing = ids.filter((id) => !this.items.has(id));
    return batchAnswer(results, missing.length === 0 ? [] : [notFound(missing)]);
  }

  /** `POST …/batch/update`: each input's properties applied (sparse, a HubDB row's values by column), its update time moved. */
  update(inputs: readonly { id: string; fields: Record<string, unknown> }[], refuse: Record<string, string> = {}): { status: number; body: string } {
    const results: Item[] = [];
    const errors: unknown[] = [];
    for (const { id, fields } of inputs) {
      if (refuse[id]) {
        errors.push({ status: 'error', category: 'VALIDATION_ERROR', message: refuse[id], context: { ids: [id] } });
        continue;
      }
      const item = this.get(id);
      for (const [k, v] of Object.entries(fields)) {
        if (k === 'values' && v && typeof v === 'object') item.values = { ...(item.values as object), ...(v as object) };
        else item[k] = v;
      }
      item[updatedKey(this.type)] = this.tick();
      results.push(structuredClone(item));
    }
    return batchAnswer(results, errors);
  }
}

/** A CMS v3 batch answer as HubSpot writes it: status 200, or 207 with `errors` and `numErrors`. */
export function batchAnswer(results: readonly unknown[], errors: readonly unknown[] = []): { status: number; body: string } {
  const base = { status: 'COMPLETE', results, startedAt: '2026-02-01T00:00:00.000Z', completedAt: '2026-02-01T00:00:00.300Z' };
  return errors.length === 0
    ? { status: 200, body: JSON.stringify(base) }
    : { status: 207, body: JSON.stringify({ ...base, numErrors: errors.length, errors }) };
}

/** HubSpot's per-input error for ids it does not have. */
export function notFound(ids: readonly string[]): unknown {
  return { status: 'error', category: 'OBJECT_NOT_FOUND', message: 'Could not get some objects, they may be deleted or not exist.', context: { ids } };
}

/** Stores `items` as the portal's copy of `type` through the real fetch path (a full fetch: one page, then completed). */
export async function seedCopy(sql: Sql, portal: { portalId: string; userId: string }, type: ContentType, items: readonly Item[], tableId?: string): Promise<void> {
  const run = await createRun(sql, { portalId: portal.portalId, requestedBy: portal.userId, kind: 'fetch', contentTypes: [type] });
  expect(run.createdTypes).toEqual([type]);
  const job = await claimOf(sql, 'fetch', run.runId!);
  const saved = await saveFetchedPageRaw(sql, job, JSON.stringify({ results: items }), tableId ? { tableId } : null);
  expect(saved?.fetched).toBe(items.length);
  expect(await completeFetchJob(sql, job)).toBe(true);
}

/** Stores HubDB rows of several tables (table id → its rows) as the portal's copy, through one full fetch: a page per table. */
export async function seedRows(sql: Sql, portal: { portalId: string; userId: string }, tables: Record<string, readonly Item[]>): Promise<void> {
  const run = await createRun(sql, { portalId: portal.portalId, requestedBy: portal.userId, kind: 'fetch', contentTypes: ['hubdb_rows'] });
  const job = await claimOf(sql, 'fetch', run.runId!);
  const ids = Object.keys(tables);
  for (const [i, tableId] of ids.entries()) {
    const context = { tableId, ...(ids[i + 1] ? { nextTableId: ids[i + 1] } : {}) };
    expect((await saveFetchedPageRaw(sql, job, JSON.stringify({ results: tables[tableId] }), context))?.fetched).toBe(tables[tableId]!.length);
  }
  expect(await completeFetchJob(sql, job)).toBe(true);
}

/** Claims the pending job of `kind` in `runId` (other runs' jobs are left pending). */
export async function claimOf(sql: Sql, kind: 'fetch' | 'plan' | 'publish' | 'restore', runId: string, workerId = `w-${kind}`): Promise<ClaimedJob> {
  for (let i = 0; i < 20; i++) {
    const job = await claimNextJob(sql, workerId, [kind]);
    if (!job) break;
    if (job.runId === runId) return job;
    throw new Error(`claimed a ${kind} job of another run (${job.runId}); drain the queue between tests`);
  }
  throw new Error(`no ${kind} job of run ${runId} to claim`);
}

/** Runs every job of a plan run against HubSpot's items (per type), in batches of `batch`; completes each. */
export async function runPlan(sql: Sql, runId: string, hubspot: Partial<Record<ContentType, HubSpotItems>>, batch = 100): Promise<void> {
  for (;;) {
    const job = await claimNextJob(sql, 'w-plan', ['plan']);
    if (!job) return;
    expect(job.runId).toBe(runId);
    const hs = hubspot[job.contentType!]!;
    for (;;) {
      const items = (await nextPublishItems(sql, job, batch))!;
      if (items.length === 0) break;
      const answer = hs.read(items.map((i) => objectId(job.contentType!, i.hubspotId)));
      expect(await recordPlanBatch(sql, job, items.map((i) => i.itemId), answer.body)).not.toBeNull();
    }
    expect(await completeJob(sql, job)).toBe(true);
  }
}

/** HubSpot's own id of a stored item (a HubDB row's row id). */
export const objectId = (type: ContentType, hubspotId: string): string => (type === 'hubdb_rows' ? hubspotId.split(':')[1]! : hubspotId);

/** One publish (or restore) job's batch, re-read then written against HubSpot's items: how many items it handled (null: fenced off). */
export async function applyBatch(sql: Sql, job: ClaimedJob, hs: HubSpotItems, batch = 100, refuse: Record<string, string> = {}): Promise<number | null> {
  const restore = job.kind === 'restore';
  const items = await nextPublishItems(sql, job, batch);
  if (items === null) return null;
  if (items.length === 0) return 0;
  const ids = items.map((i) => i.itemId);
  const reread = hs.read(items.map((i) => objectId(job.contentType!, i.hubspotId)));
  const toWrite = restore ? await prepareRestoreBatch(sql, job, ids, reread.body) : await preparePublishBatch(sql, job, ids, reread.body);
  if (toWrite === null) return null;
  if (toWrite.length === 0) return items.length;
  const answer = hs.update(toWrite.map((w) => ({ id: objectId(job.contentType!, w.hubspotId), fields: w.fields })), refuse);
  const sent = toWrite.map((w) => w.itemId);
  const recorded = restore ? await recordRestoreBatch(sql, job, sent, answer.status, answer.body) : await recordPublishBatch(sql, job, sent, answer.status, answer.body);
  return recorded === null ? null : items.length;
}

/** Runs every pending job of a publish or restore run to its end against HubSpot's items; completes each. */
export async function runApply(sql: Sql, kind: 'publish' | 'restore', runId: string, hubspot: Partial<Record<ContentType, HubSpotItems>>): Promise<void> {
  for (;;) {
    const job = await claimNextJob(sql, `w-${kind}`, [kind]);
    if (!job) return;
    expect(job.runId).toBe(runId);
    for (let n = 0; (await applyBatch(sql, job, hubspot[job.contentType!]!)) !== 0; n++) expect(n).toBeLessThan(1000);
    expect(await completeJob(sql, job)).toBe(true);
  }
}

/** The claims PostgREST would set for a signed-in user. */
export const userClaims = (userId: string) => ({ sub: userId, role: 'authenticated', aud: 'authenticated' });

/** Writes a pending edit as the portal's owner would through supabase-js (RLS, the fill trigger): its id. */
export async function addEdit(
  sql: Sql, portal: { portalId: string; userId: string }, type: ContentType, hubspotId: string, base: string, patch: Record<string, unknown>,
): Promise<string> {
  const [row] = await asUser(sql, userClaims(portal.userId), (tx) => tx`insert into public.content_edits
      (portal_id, content_type, hubspot_id, base_updated_at, patch)
    values (${portal.portalId}, ${type}, ${hubspotId}, ${base}, ${tx.json(patch as never)}) returning id::text`);
  return row!.id as string;
}

/** A plan of the portal's pending edits, its plan run run against HubSpot's items: its ids. */
export async function makePlan(
  sql: Sql, portal: { portalId: string; userId: string }, hubspot: Partial<Record<ContentType, HubSpotItems>>,
  opts: Omit<CreatePlanInput, 'portalId' | 'userId'> = {},
): Promise<{ planId: string; planRunId: string; items: number }> {
  const plan = await createPublishPlan(sql, { portalId: portal.portalId, userId: portal.userId, ...opts });
  await runPlan(sql, plan.runId, hubspot);
  return { planId: plan.planId, planRunId: plan.runId, items: plan.items };
}
