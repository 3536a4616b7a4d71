// Publish, the database side (supabase/schemas/0280-0285, 0470-0502): the
// editable-field registry against TypeScript's and HubSpot's published request
// schemas (the simulator's spec facts), the audit log's object types against
// write-endpoints.ts's, edits written by an owner
// under RLS and refused with a clear error by the trigger, plans made from
// pending edits, a plan job's batches classified from HubSpot-shaped
// batch/read answers, approval (fresh, once, the owner only, from 8
// connections at once), and what another user can see. The apply and the
// rollback: tests/publish-apply.test.ts; the window: publish-window; mode
// schedule: publish-schedule; CSV imports: publish-csv-import.
import { beforeEach, describe, expect, it } from 'vitest';
import { CONTENT_TYPES, contentType, type ContentType } from '../shared/content-types.ts';
import { asUser, connectDatabase } from '../shared/db.ts';
import { auditObjectType } from '../shared/hubspot/write-endpoints.ts';
import { EDITABLE_FIELDS, type EditableJsonType } from '../shared/publish-fields.ts';
import type { FieldType } from '../hubspot-sim/schema-facts.ts';
import {
  AUDIT_OBJECT_TYPES, BATCH_BODIES, fieldTypes, ITEM_SHAPE, READ_ONLY_FIELDS, WRITE_SHAPES,
} from '../hubspot-sim/schema-facts-writes.ts';
import { claimNextJob, completeJob } from '../shared/sql/jobs.ts';
import {
  approvePublishPlan, createPublishPlan, discardPublishPlan, nextPublishItems, publishAuditCsv, publishItems, publishPlan,
  publishRefusalOf, publishSettings, recordPlanBatch,
} from '../shared/sql/publish.ts';
import { createUser, createUserWithPortal, useTestDatabase } from './support/database.ts';
import { drainQueue, jobsOfRun, notificationsOf, pgError, runRow } from './support/queue-fixtures.ts';
import {
  addEdit, batchAnswer, cmsItem, HubSpotItems, makePlan, notFound, runPlan, seedCopy, userClaims,
} from './support/publish-fixtures.ts';

const db = useTestDatabase();

beforeEach(async () => {
  await drainQueue(db.sql);
});

const T0 = '2026-01-10T00:00:00.000Z';

/** A user, a portal, and its copy of site pages 1..n (HubSpot holds the same). */
async function portalWithPages(n = 3) {
  const portal = await createUserWithPortal(db.sql);
  const hs = new HubSpotItems('site_pages').put(...Array.from({ length: n }, (_, i) => cmsItem(String(i + 1), T0)));
  await seedCopy(db.sql, portal, 'site_pages', [...hs.items.values()]);
  return { ...portal, hs };
}

/** Rows of the publish tables, to prove a refused call changed nothing. */
async function publishDigest(): Promise<string> {
  const [row] = await db.sql`select md5(concat_ws('|',
      (select string_agg(t::text, ',' order by t.id) from public.content_edits t),
      (select string_agg(t::text, ',' order by t.id) from public.publish_plans t),
      (select string_agg(t::text, ',' order by t.id) from public.publish_items t),
      (select string_agg(t::text, ',' order by t.id) from public.runs t),
      (select string_agg(t::text, ',' order by t.id) from public.jobs t))) as digest`;
  return row!.digest as string;
}

async function refusal(call: () => Promise<unknown>) {
  try {
    await call();
  } catch (e) {
    const r = publishRefusalOf(e);
    if (r) return { code: r.code, status: r.status, message: r.message };
    throw e;
  }
  throw new Error('expected a refusal, but the call succeeded');
}

describe('the editable-field registry', () => {
  it('SQL and TypeScript list the same fields with the same JSON types, each an export column of its type', async () => {
    const rows = await db.sql`select content_type, field, json_type from private.editable_fields order by 1, 2`;
    const sqlSide: Record<string, Record<string, string>> = {};
    for (const r of rows) (sqlSide[r.content_type as string] ??= {})[r.field as string] = r.json_type as string;
    expect(sqlSide).toEqual(EDITABLE_FIELDS);
    expect(Object.keys(sqlSide)).not.toContain('hubdb_tables');
    for (const [type, fields] of Object.entries(EDITABLE_FIELDS)) {
      for (const f of Object.keys(fields)) expect(contentType(type as ContentType).exportColumns, `${type}.${f}`).toContain(f);
    }
  });

  it("every editable field is in its type's published request schemas (the simulator's spec facts) with a compatible JSON type", async () => {
    const rows = await db.sql`select content_type, field, json_type from private.editable_fields order by 1, 2`;
    expect(rows.length).toBe(Object.values(EDITABLE_FIELDS).reduce((n, f) => n + Object.keys(f).length, 0));
    const problems = rows.flatMap((r) => registryProblems(r.content_type as ContentType, r.field as string, r.json_type as EditableJsonType));
    expect(problems).toEqual([]);
    // It can fail: a field the schema lacks, a type it does not take, a field HubSpot sets itself.
    expect(registryProblems('site_pages', 'title', 'string')).toEqual(['site_pages.title: not in PageBatchInput', 'site_pages.title: not in PageDraftInput']);
    expect(registryProblems('blog_posts', 'tagIds', 'string')).toEqual([
      'blog_posts.tagIds: string, the spec says {"arrayOf":"integer"} (BlogPostBatchInput)', 'blog_posts.tagIds: string, the spec says {"arrayOf":"integer"} (BlogPostDraftInput)']);
    expect(registryProblems('url_redirects', 'created', 'string')).toEqual([
      'url_redirects.created: string, the spec says "date-time" (UrlMapping)', 'url_redirects.created: HubSpot sets it (read-only)']);
  });

  it("record_window_events' audit object types are write-endpoints.ts's AUDIT_OBJECT_TYPE, each in PublicAuditLog's enum", async () => {
    const rows = await db.sql`select t as content_type, private.audit_object_type(t) as object_type from unnest(${CONTENT_TYPES as string[]}::text[]) t`;
    const ours = Object.fromEntries(CONTENT_TYPES.map((t) => [t, auditObjectType(t)]));
    expect(Object.fromEntries(rows.map((r) => [r.content_type, r.object_type]))).toEqual(ours);
    for (const t of Object.values(ours)) if (t !== null) expect(AUDIT_OBJECT_TYPES).toContain(t);
    // The mapping tested is the one the function uses.
    const [fn] = await db.sql`select pg_get_functiondef('public.record_window_events(bigint, bigint, text)'::regprocedure) as src`;
    expect(fn!.src).toContain('private.audit_object_type(v_job.content_type)');
  });

  it('the publish settings have their documented defaults', async () => {
    expect(await publishSettings(db.sql)).toEqual({ planFreshMinutes: 30, batchSize: 100, maxCsvBytes: 5 * 1024 * 1024, maxEditsPerPlan: 50_000 });
  });

  it("SQL's export columns are the registry's exportColumns, in order", async () => {
    const rows = await db.sql`select content_type, array_agg(column_name order by position) as columns from private.export_columns group by 1`;
    expect(Object.fromEntries(rows.map((r) => [r.content_type, r.columns]))).toEqual(
      Object.fromEntries(CONTENT_TYPES.map((t) => [t, [...contentType(t).exportColumns]])));
  });
});

/** The request bodies an edit of each type is sent in (batch/update inputs, draft PATCHes, a redirect's PATCH, HubDB draft rows). */
function requestSchemas(type: ContentType): [string, Readonly<Record<string, FieldType>>][] {
  const shape = (name: keyof typeof WRITE_SHAPES): [string, Readonly<Record<string, FieldType>>] =>
    [name, { ...WRITE_SHAPES[name].required, ...WRITE_SHAPES[name].optional }];
  if (type === 'url_redirects') return [[ITEM_SHAPE.url_redirects, fieldTypes(ITEM_SHAPE.url_redirects)]];
  if (type === 'hubdb_rows') return [shape('HubDbTableRowV3BatchUpdateRequest')];
  const bodies = BATCH_BODIES[type as keyof typeof BATCH_BODIES];
  if (!bodies) throw new Error(`${type}: no request schema`);
  return [shape(bodies.updateInput), ...(bodies.draftInput ? [shape(bodies.draftInput)] : [])];
}

/** Whether a published field type takes the values an edit's JSON type allows. */
function compatible(json: EditableJsonType, spec: FieldType): boolean {
  switch (json) {
    case 'string': return spec === 'string' || (typeof spec === 'object' && 'enum' in spec);
    case 'integer': return spec === 'integer';
    case 'number': return spec === 'number';
    case 'boolean': return spec === 'boolean';
    case 'array_of_integers': return typeof spec === 'object' && 'arrayOf' in spec && spec.arrayOf === 'integer';
    case 'object': return spec === 'object' || (typeof spec === 'object' && 'mapOf' in spec);
  }
}

/** What is wrong with one registry row against the spec facts (nothing: []). */
function registryProblems(type: ContentType, field: string, json: EditableJsonType): string[] {
  const problems: string[] = [];
  for (const [name, fields] of requestSchemas(type)) {
    const spec = fields[field];
    if (spec === undefined) problems.push(`${type}.${field}: not in ${name}`);
    else if (!compatible(json, spec)) problems.push(`${type}.${field}: ${json}, the spec says ${JSON.stringify(spec)} (${name})`);
  }
  if ((READ_ONLY_FIELDS as Partial<Record<string, readonly string[]>>)[type]?.includes(field)) problems.push(`${type}.${field}: HubSpot sets it (read-only)`);
  return problems;
}

describe('edits written by their owner (RLS and the fill trigger)', () => {
  it('stores a pending edit with the owner, source and writer filled in', async () => {
    const p = await portalWithPages();
    const id = await addEdit(db.sql, p, 'site_pages', '1', T0, { name: 'New name', metaDescription: null });
    const [e] = await db.sql`select * from public.content_edits where id = ${id}`;
    expect(e).toMatchObject({ owner_id: p.userId, created_by: p.userId, source: 'app', status: 'pending', plan_id: null,
                              patch: { name: 'New name', metaDescription: null } });
    // The owner changes it, and reads it back.
    const changed = await asUser(db.sql, userClaims(p.userId), (tx) =>
      tx`update public.content_edits set patch = ${tx.json({ slug: 'new-slug' })} where id = ${id} returning id`);
    expect(changed).toHaveLength(1);
    // A second pending edit of the item is refused: update the first one instead.
    const dup = await pgError(() => addEdit(db.sql, p, 'site_pages', '1', T0, { name: 'x' }));
    expect(dup.code).toBe('23505');
  });

  it.each([
    ['an unknown field', 'site_pages', '1', { title: 'x' }, /"title" is not an editable field of site_pages \(editable: authorName, htmlTitle, metaDescription, name, slug\)/],
    ['a read-only field', 'site_pages', '1', { url: 'https://x.test' }, /"url" is not an editable field/],
    ['a wrong type', 'site_pages', '1', { slug: 5 }, /"slug" of site_pages must be a string or null, got 5/],
    ['an empty patch', 'site_pages', '1', {}, /the patch must be a non-empty JSON object/],
    ['an item not in the copy', 'site_pages', '99', { name: 'x' }, /site_pages 99 is not a live item of this portal's copy/],
    ['a type that is not editable', 'hubdb_tables', '1', { name: 'x' }, /hubdb_tables items are not editable/],
    ['a fractional integer', 'url_redirects', '1', { precedence: 1.5 }, /"precedence" of url_redirects must be a whole number/],
    ['tag ids that are not whole numbers', 'blog_posts', '1', { tagIds: [1, 'a'] }, /"tagIds" of blog_posts must be an array of whole numbers/],
  ])('refuses %s with 22023, naming it, and stores nothing', async (_label, type, id, patch, message) => {
    const p = await portalWithPages();
    const before = await publishDigest();
    const err = await pgError(() => addEdit(db.sql, p, type as ContentType, id, T0, patch));
    expect(err.code).toBe('22023');
    expect(err.message).toMatch(message);
    expect(await publishDigest()).toBe(before);
  });

  it("another user can neither write an edit for the portal, nor read, change or delete the owner's", async () => {
    const p = await portalWithPages();
    const id = await addEdit(db.sql, p, 'site_pages', '1', T0, { name: 'Mine' });
    const other = await createUser(db.sql);
    const before = await publishDigest();
    const err = await pgError(() => addEdit(db.sql, { portalId: p.portalId, userId: other }, 'site_pages', '2', T0, { name: 'x' }));
    expect(err).toMatchObject({ code: 'P0002' });
    expect(err.message).toMatch(/portal .* not found/);
    await asUser(db.sql, userClaims(other), async (tx) => {
      expect(await tx`select id from public.content_edits`).toHaveLength(0);
      expect(await tx`update public.content_edits set patch = ${tx.json({ name: 'x' })} where id = ${id} returning id`).toHaveLength(0);
      expect(await tx`delete from public.content_edits where id = ${id} returning id`).toHaveLength(0);
    });
    // Nor can the owner set what is the service role's: status, source, plan.
    const col = await pgError(() => asUser(db.sql, userClaims(p.userId), (tx) => tx`update public.content_edits set status = 'planned' where id = ${id}`));
    expect(col.code).toBe('42501');
    expect(await publishDigest()).toBe(before);
  });
});

describe('create_publish_plan', () => {
  it('takes the pending edits into a plan, one item each, and a plan run with a job per type', async () => {
    const p = await portalWithPages();
    const tags = new HubSpotItems('blog_tags').put({ id: 't1', name: 'News', slug: 'news', language: 'en', created: T0, updated: T0 });
    await seedCopy(db.sql, p, 'blog_tags', [...tags.items.values()]);
    await addEdit(db.sql, p, 'site_pages', '2', T0, { name: 'Two' });
    await addEdit(db.sql, p, 'site_pages', '1', T0, { name: 'One' });
    await addEdit(db.sql, p, 'blog_tags', 't1', T0, { name: 'Updates' });
    const plan = await createPublishPlan(db.sql, { portalId: p.portalId, userId: p.userId });
    expect(plan.items).toBe(3);
    const row = await publishPlan(db.sql, userClaims(p.userId), plan.planId);
    expect(row).toMatchObject({ status: 'planning', mode: 'live', content_types: ['blog_tags', 'site_pages'], items_total: 3, plan_run_id: plan.runId,
                                created_by: p.userId, fresh_until: null });
    const jobs = await jobsOfRun(db.sql, plan.runId);
    expect(jobs.map((j) => [j.kind, j.content_type, j.progress_total])).toEqual([['plan', 'blog_tags', 1], ['plan', 'site_pages', 2]]);
    const items = await db.sql`select content_type, hubspot_id, after from public.publish_items where plan_id = ${plan.planId} order by id`;
    expect(items.map((i) => [i.content_type, i.hubspot_id, i.after])).toEqual([
      ['blog_tags', 't1', { name: 'Updates' }], ['site_pages', '1', { name: 'One' }], ['site_pages', '2', { name: 'Two' }]]);
    expect((await db.sql`select distinct status from public.content_edits where portal_id = ${p.portalId}`).map((e) => e.status)).toEqual(['planned']);
  });

  it('refuses, with nothing changed: no pending edits, another user, a plan in flight, bad modes, too many', async () => {
    const p = await portalWithPages();
    const other = await createUserWithPortal(db.sql);
    let before = await publishDigest();
    expect(await refusal(() => createPublishPlan(db.sql, { portalId: p.portalId, userId: p.userId }))).toMatchObject({ code: 'no_edits', status: 404 });
    expect(await publishDigest()).toBe(before);
    await addEdit(db.sql, p, 'site_pages', '1', T0, { name: 'One' });
    before = await publishDigest();
    expect(await refusal(() => createPublishPlan(db.sql, { portalId: p.portalId, userId: other.userId }))).toMatchObject({ code: 'not_found', status: 404 });
    expect(await refusal(() => createPublishPlan(db.sql, { portalId: p.portalId, userId: p.userId, mode: 'schedule' })))
      .toMatchObject({ code: 'invalid', status: 400, message: 'a publish time goes with schedule mode, and only with it' });
    expect(await refusal(() => createPublishPlan(db.sql, { portalId: p.portalId, userId: p.userId, mode: 'schedule', publishAt: new Date(Date.now() - 1000) })))
      .toMatchObject({ code: 'invalid', message: 'the publish time must be in the future' });
    expect(await publishDigest()).toBe(before);
    await db.sql`update private.publish_settings set max_edits_per_plan = 1`;
    await addEdit(db.sql, p, 'site_pages', '2', T0, { name: 'Two' });
    const twoEdits = await publishDigest();
    expect(await refusal(() => createPublishPlan(db.sql, { portalId: p.portalId, userId: p.userId })))
      .toMatchObject({ code: 'too_many', status: 413 });
    expect(await publishDigest()).toBe(twoEdits);
    await db.sql`update private.publish_settings set max_edits_per_plan = 50000`;

    // Draft or schedule mode writes pages and posts only.
    const tags = new HubSpotItems('blog_tags').put({ id: 't1', name: 'News', slug: 'news', created: T0, updated: T0 });
    await seedCopy(db.sql, p, 'blog_tags', [...tags.items.values()]);
    await addEdit(db.sql, p, 'blog_tags', 't1', T0, { name: 'x' });
    before = await publishDigest();
    expect(await refusal(() => createPublishPlan(db.sql, { portalId: p.portalId, userId: p.userId, mode: 'draft' })))
      .toMatchObject({ code: 'invalid', message: 'draft mode writes pages and posts only: plan the other types (blog_tags) apart' });
    expect(await publishDigest()).toBe(before);

    // A plan still being made for a type: another plan of it waits.
    const first = await createPublishPlan(db.sql, { portalId: p.portalId, userId: p.userId, contentTypes: ['site_pages'] });
    await addEdit(db.sql, p, 'site_pages', '3', T0, { name: 'Three' });
    before = await publishDigest();
    expect(await refusal(() => createPublishPlan(db.sql, { portalId: p.portalId, userId: p.userId, contentTypes: ['site_pages'] })))
      .toMatchObject({ code: 'busy', status: 409 });
    expect(await publishDigest()).toBe(before);
    // Another type's plan is fine meanwhile.
    const tagsPlan = await createPublishPlan(db.sql, { portalId: p.portalId, userId: p.userId, contentTypes: ['blog_tags'] });
    expect(tagsPlan.items).toBe(1);
    expect(first.items).toBe(2);
  });

  it("a new plan discards the portal's unapproved plan of its types and plans its edits again; discard gives edits back", async () => {
    const p = await portalWithPages();
    await addEdit(db.sql, p, 'site_pages', '1', T0, { name: 'One' });
    const first = await makePlan(db.sql, p, { site_pages: p.hs });
    // A newer edit of item 1 while the first plan holds the older one, and an edit of item 2.
    const newer = await addEdit(db.sql, p, 'site_pages', '1', T0, { name: 'One, again' });
    await addEdit(db.sql, p, 'site_pages', '2', T0, { name: 'Two' });
    const second = await createPublishPlan(db.sql, { portalId: p.portalId, userId: p.userId });
    expect(second.items).toBe(2);
    expect((await publishPlan(db.sql, userClaims(p.userId), first.planId))!.status).toBe('discarded');
    const edits = await db.sql`select e.id::text, hubspot_id, status, plan_id, patch from public.content_edits e where portal_id = ${p.portalId} order by e.id`;
    // The first plan's edit of item 1 is discarded (a newer one existed); the newer one is in the new plan.
    expect(edits.map((e) => [e.hubspot_id, e.status, e.plan_id === second.planId])).toEqual([
      ['1', 'discarded', false], ['1', 'planned', true], ['2', 'planned', true]]);
    expect(edits[1]!.id).toBe(newer);
    await runPlan(db.sql, second.runId, { site_pages: p.hs });
    expect(await discardPublishPlan(db.sql, second.planId, p.userId)).toBe(true);
    expect(await discardPublishPlan(db.sql, second.planId, p.userId)).toBe(false);
    expect((await db.sql`select status from public.content_edits where plan_id is null and portal_id = ${p.portalId} order by id`).map((e) => e.status))
      .toEqual(['pending', 'pending']);
  });
});

describe('a plan job classifies its items from HubSpot batch/read answers', () => {
  it('ready, conflict, unchanged, missing and invalid; the plan settles ready with its counts, fresh for 30 minutes', async () => {
    const p = await portalWithPages(6);
    await addEdit(db.sql, p, 'site_pages', '1', T0, { name: 'Ready' });
    await addEdit(db.sql, p, 'site_pages', '2', T0, { name: 'Conflict' });
    await addEdit(db.sql, p, 'site_pages', '3', T0, { name: 'Page 3', slug: 'page-3' }); // HubSpot has these already
    await addEdit(db.sql, p, 'site_pages', '4', T0, { name: 'Missing' });
    await addEdit(db.sql, p, 'site_pages', '5', T0, { name: 'Invalid' });
    const plan = await createPublishPlan(db.sql, { portalId: p.portalId, userId: p.userId });
    p.hs.edit('2', { name: 'Changed in HubSpot' });
    const job = (await claimNextJob(db.sql, 'planner', ['plan']))!;
    const items = (await nextPublishItems(db.sql, job, 100))!;
    expect(items.map((i) => [i.hubspotId, i.state, i.writes])).toEqual([['1', null, 0], ['2', null, 0], ['3', null, 0], ['4', null, 0], ['5', null, 0]]);
    const ids = items.map((i) => i.itemId);
    const answer = batchAnswer([p.hs.get('1'), p.hs.get('2'), p.hs.get('3')], [
      notFound(['4']),
      { status: 'error', category: 'VALIDATION_ERROR', message: 'Page 5 cannot be read in this state', context: { ids: ['5'] } },
    ]);
    expect(answer.status).toBe(207);

    // Not the holder (an old token): refused, nothing changed.
    const before = await publishDigest();
    expect(await recordPlanBatch(db.sql, { id: job.id, fencingToken: String(BigInt(job.fencingToken) - 1n) }, ids, answer.body)).toBeNull();
    // Malformed answers and ids of another job: refused with nothing changed.
    expect((await pgError(() => recordPlanBatch(db.sql, job, ids, '{"results":'))).code).toBe('22P02');
    expect((await pgError(() => recordPlanBatch(db.sql, job, ids, '{"status":"COMPLETE"}'))).code).toBe('22023');
    expect((await pgError(() => recordPlanBatch(db.sql, job, ids, '{"results":[{"name":"no id"}]}'))).code).toBe('22023');
    expect((await pgError(() => recordPlanBatch(db.sql, job, [...ids, '999999999'], answer.body))).message).toMatch(/item 999999999 is not one of job/);
    expect(await publishDigest()).toBe(before);

    expect(await recordPlanBatch(db.sql, job, ids, answer.body)).toEqual({ ready: 1, conflict: 1, unchanged: 1, missing: 1, invalid: 1 });
    // The same batch again (a retried call) changes nothing.
    const once = await publishDigest();
    expect(await recordPlanBatch(db.sql, job, ids, answer.body)).toEqual({ ready: 0, conflict: 0, unchanged: 0, missing: 0, invalid: 0 });
    const rows = await db.sql`select hubspot_id, plan_status, plan_message, before, current, planned_updated_at from public.publish_items
                               where plan_id = ${plan.planId} order by id`;
    expect(rows.map((r) => [r.hubspot_id, r.plan_status])).toEqual([['1', 'ready'], ['2', 'conflict'], ['3', 'unchanged'], ['4', 'missing'], ['5', 'invalid']]);
    expect(rows[0]).toMatchObject({ before: { name: 'Page 1' }, current: null, plan_message: null });
    expect(rows[0]!.planned_updated_at).toEqual(new Date(T0));
    expect(rows[1]).toMatchObject({ before: null, current: { name: 'Changed in HubSpot' } });
    expect(rows[1]!.plan_message).toMatch(/^changed in HubSpot since the edit's base \(updated 2026-02-01T00:00:01.000Z, the edit is based on 2026-01-10T00:00:00.000Z\)/);
    expect(rows[2]).toMatchObject({ before: { name: 'Page 3', slug: 'page-3' } });
    expect(rows[3]!.plan_message).toMatch(/not in HubSpot/);
    expect(rows[4]!.plan_message).toBe('Page 5 cannot be read in this state');

    expect(await nextPublishItems(db.sql, job, 100)).toEqual([]);
    expect((await jobsOfRun(db.sql, plan.runId))[0]).toMatchObject({ progress_done: 5, progress_total: 5 });
    expect(await completeJob(db.sql, job)).toBe(true);
    expect(await publishDigest()).not.toBe(once);
    const settled = await publishPlan(db.sql, userClaims(p.userId), plan.planId);
    const run = await runRow(db.sql, plan.runId);
    expect(run).toMatchObject({ kind: 'plan', status: 'completed' });
    expect(settled).toMatchObject({ status: 'ready', items_total: 5, items_ready: 1, items_conflict: 1, items_unchanged: 1, items_missing: 1, items_invalid: 1 });
    expect(settled!.fresh_until!.getTime() - (run.finished_at as Date).getTime()).toBe(30 * 60_000);
    const [note] = await notificationsOf(db.sql, plan.runId);
    expect(note).toMatchObject({ kind: 'run_completed', user_id: p.userId });
    expect(note!.message).toMatch(/^Plan ready: 5 items, 1 to publish, 1 conflicts, 1 unchanged, 1 missing, 1 invalid\. Approve it by /);
  });

  it('a plan run that fails leaves its plan failed and its edits pending again', async () => {
    const p = await portalWithPages();
    await addEdit(db.sql, p, 'site_pages', '1', T0, { name: 'One' });
    const plan = await createPublishPlan(db.sql, { portalId: p.portalId, userId: p.userId });
    const job = (await claimNextJob(db.sql, 'planner', ['plan']))!;
    await db.sql`select public.fail_job(${job.id}, ${job.fencingToken}, 'HubSpot said 500 three times', false)`;
    expect(await publishPlan(db.sql, userClaims(p.userId), plan.planId)).toMatchObject({ status: 'failed', fresh_until: null });
    expect((await db.sql`select status, plan_id from public.content_edits where portal_id = ${p.portalId}`)[0]).toMatchObject({ status: 'pending', plan_id: null });
    expect((await notificationsOf(db.sql, plan.runId))[0]!.message).toBe('Plan failed: 0 of 1 items read; its edits are pending again. First error: HubSpot said 500 three times');
    // Planned again: the same edit.
    expect((await createPublishPlan(db.sql, { portalId: p.portalId, userId: p.userId })).items).toBe(1);
  });
});

describe('approve_publish_plan', () => {
  it('makes one publish run of the ready items per type, once; stale, foreign and not-ready plans are refused', async () => {
    const p = await portalWithPages();
    await addEdit(db.sql, p, 'site_pages', '1', T0, { name: 'One' });
    await addEdit(db.sql, p, 'site_pages', '2', T0, { name: 'Two' });
    const stranger = await createUserWithPortal(db.sql);
    const plan = await createPublishPlan(db.sql, { portalId: p.portalId, userId: p.userId });
    expect(await refusal(() => approvePublishPlan(db.sql, plan.planId, p.userId))).toMatchObject({ code: 'not_ready', status: 409 });
    p.hs.edit('2', { name: 'Theirs' });
    await runPlan(db.sql, plan.runId, { site_pages: p.hs });

    const before = await publishDigest();
    expect(await refusal(() => approvePublishPlan(db.sql, plan.planId, stranger.userId))).toMatchObject({ code: 'not_found', status: 404 });
    expect(await publishDigest()).toBe(before);
    // Back-dated past its freshness: stale, plan again.
    await db.sql`update public.publish_plans set fresh_until = now() - interval '1 second' where id = ${plan.planId}`;
    const stale = await publishDigest();
    expect(await refusal(() => approvePublishPlan(db.sql, plan.planId, p.userId))).toMatchObject({ code: 'stale', status: 409 });
    expect(await publishDigest()).toBe(stale);
    await db.sql`update public.publish_plans set fresh_until = now() + interval '10 minutes' where id = ${plan.planId}`;

    const runId = await approvePublishPlan(db.sql, plan.planId, p.userId);
    expect(await runRow(db.sql, runId)).toMatchObject({ kind: 'publish', status: 'pending', requested_by: p.userId, content_types: ['site_pages'] });
    expect((await jobsOfRun(db.sql, runId)).map((j) => [j.kind, j.content_type, j.progress_total])).toEqual([['publish', 'site_pages', 1]]);
    expect(await publishPlan(db.sql, userClaims(p.userId), plan.planId)).toMatchObject({ status: 'approved', approved_by: p.userId, publish_run_id: runId });
    const once = await publishDigest();
    expect(await refusal(() => approvePublishPlan(db.sql, plan.planId, p.userId))).toMatchObject({ code: 'already_approved' });
    expect(await publishDigest()).toBe(once);
  });

  it('a plan with nothing ready is refused', async () => {
    const p = await portalWithPages();
    await addEdit(db.sql, p, 'site_pages', '1', T0, { name: 'Page 1' });
    const plan = await makePlan(db.sql, p, { site_pages: p.hs });
    expect(await refusal(() => approvePublishPlan(db.sql, plan.planId, p.userId))).toMatchObject({ code: 'nothing_ready' });
  });

  it('approved from 8 connections at once: exactly one publish run', async () => {
    const p = await portalWithPages();
    await addEdit(db.sql, p, 'site_pages', '1', T0, { name: 'One' });
    const plan = await makePlan(db.sql, p, { site_pages: p.hs });
    const pools = Array.from({ length: 8 }, () => connectDatabase(db.url, { max: 1 }));
    try {
      await Promise.all(pools.map((s) => s`select 1`)); // 8 connections open before the race
      const results = await Promise.allSettled(pools.map((s) => approvePublishPlan(s, plan.planId, p.userId)));
      const won = results.filter((r) => r.status === 'fulfilled');
      expect(won).toHaveLength(1);
      for (const r of results) if (r.status === 'rejected') expect((r.reason as { code: string }).code).toBe('already_approved');
      const runs = await db.sql`select id from public.runs where portal_id = ${p.portalId} and kind = 'publish'`;
      expect(runs.map((r) => r.id)).toEqual([(won[0] as PromiseFulfilledResult<string>).value]);
    } finally {
      await Promise.all(pools.map((s) => s.end({ timeout: 5 })));
    }
  });
});

describe("another user's view", () => {
  it('reads none of the plans, items and edits, writes none, and gets no audit CSV; the owner reads all', async () => {
    const p = await portalWithPages();
    await addEdit(db.sql, p, 'site_pages', '1', T0, { name: '=SUM(A1)' });
    const plan = await makePlan(db.sql, p, { site_pages: p.hs });
    const other = await createUser(db.sql);
    await asUser(db.sql, userClaims(other), async (tx) => {
      expect(await tx`select id from public.publish_plans`).toHaveLength(0);
      expect(await tx`select id from public.publish_items`).toHaveLength(0);
      expect(await tx`select id from public.content_edits`).toHaveLength(0);
    });
    expect(await publishPlan(db.sql, userClaims(other), plan.planId)).toBeNull();
    expect(await publishItems(db.sql, userClaims(other), { planId: plan.planId, limit: 10 })).toEqual([]);
    for (const stmt of ['update public.publish_plans set status = \'approved\'', 'delete from public.publish_items',
      'insert into public.publish_plans (portal_id, owner_id, created_by, content_types) values (gen_random_uuid(), gen_random_uuid(), gen_random_uuid(), \'{site_pages}\')']) {
      const err = await pgError(() => asUser(db.sql, userClaims(p.userId), (tx) => tx.unsafe(stmt)));
      expect(`${err.code} ${err.message}`, stmt).toMatch(/^42501 permission denied for table/);
    }
    const chunks: Uint8Array[] = [];
    expect(await publishAuditCsv(db.sql, userClaims(other), plan.planId, (c) => { chunks.push(c); })).toBe(false);
    expect(chunks).toHaveLength(0);

    const items = await publishItems(db.sql, userClaims(p.userId), { planId: plan.planId, limit: 10, planStatus: 'ready' });
    expect(items.map((i) => [i.hubspot_id, i.plan_status, i.before, i.after])).toEqual([['1', 'ready', { name: 'Page 1' }, { name: '=SUM(A1)' }]]);
    expect(await publishAuditCsv(db.sql, userClaims(p.userId), plan.planId, (c) => { chunks.push(c); })).toBe(true);
    const csv = Buffer.concat(chunks).toString('utf8').trim().split('\n');
    expect(csv[0]).toMatch(/^plan_id,planned_by,planned_at,approved_by,approved_at,restored_by,restored_at,item_id,content_type,hubspot_id,/);
    expect(csv).toHaveLength(2);
    expect(csv[1]).toContain(`${plan.planId},${p.userId},`);
    expect(csv[1]).toContain('"{""name"": ""Page 1""}","{""name"": ""=SUM(A1)""}",ready'); // JSON text: not a formula
  });
});
