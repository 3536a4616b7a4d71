// Helpers for the publish worker tests: a simulator portal whose copy the real
// worker fetched, pending edits based on that copy, the edited items as HubSpot
// has them (read over HTTP, as a person checking HubSpot would), the runs
// played to their end by worker invocations, and the portal's requests by endpoint.
import { expect } from 'vitest';
import { runWorkerInvocation, type WorkerRuntime } from '../../functions/worker/invocation.ts';
import type { ContentType } from '../../shared/content-types.ts';
import type { Sql } from '../../shared/db.ts';
import { batchReadBody, batchReadPath, hubdbRowsReadPath, redirectPath, type BatchContentType } from '../../shared/hubspot/write-endpoints.ts';
import { tokenHash, type HubSpotSimulator, type PortalOptions } from '../../hubspot-sim/server.ts';
import { connectSimPortal, invokeUntilFinished, runOf, startFetchRun, type SimPortal } from './fetch-fixtures.ts';
import { addEdit } from './publish-fixtures.ts';

export type Json = Record<string, any>;

/** The editable types a publish writes (every content type but HubDB tables). */
export const EDITABLE: readonly ContentType[] = ['site_pages', 'landing_pages', 'blog_posts', 'blog_authors', 'blog_tags', 'hubdb_rows', 'url_redirects'];

/** A target patch per type for the n-th edit (fields of HubSpot's update schemas, values HubSpot takes). */
export function targetPatch(type: ContentType, n: number): Json {
  switch (type) {
    case 'site_pages': case 'landing_pages': return { htmlTitle: `Edited title ${n}`, metaDescription: `Edited description ${n}` };
    case 'blog_posts': return { htmlTitle: `Edited post ${n}`, postSummary: `Summary ${n}` };
    case 'blog_authors': return { bio: `Edited bio ${n}` };
    case 'blog_tags': return { name: `Edited tag ${n}` };
    case 'hubdb_rows': return { values: { name: `Edited row ${n}`, price: 10 + n } };
    case 'url_redirects': return { destination: `https://example.test/moved/${n}`, precedence: 100 + n };
    default: throw new Error(`${type} is not editable`);
  }
}

/** A simulator portal connected for a new user, its copy of `types` fetched by the real worker. */
export async function seedPortal(
  sql: Sql, sim: HubSpotSimulator, rt: WorkerRuntime, opts: Omit<PortalOptions, 'portalId' | 'token'>, types: readonly ContentType[],
): Promise<SimPortal> {
  const p = await connectSimPortal(sql, sim, opts);
  const runId = await startFetchRun(sql, p, types);
  await invokeUntilFinished(rt, sql, runId, { maxInvocations: 5 });
  expect((await runOf(sql, runId)).status).toBe('completed');
  return p;
}

/** The first `n` live items of a type in the copy, in id order: their ids and HubSpot update times. */
export async function copyItems(sql: Sql, p: SimPortal, type: ContentType, n: number): Promise<{ id: string; updatedAt: string }[]> {
  const rows = await sql`select hubspot_id, hubspot_updated_at from public.hubspot_content
    where portal_id = ${p.portalId} and content_type = ${type} and deleted_at is null order by hubspot_id limit ${n}`;
  expect(rows).toHaveLength(n);
  return rows.map((r) => ({ id: r.hubspot_id as string, updatedAt: (r.hubspot_updated_at as Date).toISOString() }));
}

/** Pending edits (as the owner writes them) of the first `n` items of a type, based on the copy: the targets by id. */
export async function editFirst(sql: Sql, p: SimPortal, type: ContentType, n: number, patchOf = (i: number) => targetPatch(type, i)): Promise<Map<string, Json>> {
  const targets = new Map<string, Json>();
  for (const [i, item] of (await copyItems(sql, p, type, n)).entries()) {
    const patch = patchOf(i);
    await addEdit(sql, p, type, item.id, item.updatedAt, patch);
    targets.set(item.id, patch);
  }
  return targets;
}

async function call(sim: HubSpotSimulator, p: SimPortal, method: string, path: string, body?: unknown): Promise<{ status: number; body: Json }> {
  const response = await fetch(`${sim.url}${path}`, {
    method, headers: { Authorization: `Bearer ${p.token}`, 'Content-Type': 'application/json' },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) as Json : {} };
}

/** The items as HubSpot has them now, by our ids (HubDB rows `<tableId>:<rowId>`), read over HTTP. */
export async function hubspotNow(sim: HubSpotSimulator, p: SimPortal, type: ContentType, ids: readonly string[]): Promise<Map<string, Json>> {
  const out = new Map<string, Json>();
  if (type === 'url_redirects') {
    for (const id of ids) {
      const r = await call(sim, p, 'GET', redirectPath(id));
      if (r.status === 200) out.set(id, r.body);
    }
    return out;
  }
  if (type === 'hubdb_rows') {
    const tables = new Map<string, string[]>();
    for (const id of ids) {
      const [table, row] = id.split(':') as [string, string];
      tables.set(table, [...(tables.get(table) ?? []), row]);
    }
    for (const [table, rows] of tables) {
      const r = await call(sim, p, 'POST', hubdbRowsReadPath(table), batchReadBody(rows));
      for (const item of r.body['results'] as Json[]) out.set(`${table}:${item['id']}`, item);
    }
    return out;
  }
  for (let i = 0; i < ids.length; i += 100) {
    const r = await call(sim, p, 'POST', batchReadPath(type as BatchContentType), batchReadBody(ids.slice(i, i + 100)));
    for (const item of r.body['results'] as Json[]) out.set(String(item['id']), item);
  }
  return out;
}

/** HubSpot's values of the fields a patch sets (a HubDB row's values only by the patch's columns). */
export function fieldsOf(item: Json, patch: Json): Json {
  const out: Json = {};
  for (const [field, value] of Object.entries(patch)) {
    if (field === 'values' && value && typeof value === 'object') {
      out[field] = Object.fromEntries(Object.keys(value).map((k) => [k, item['values']?.[k] ?? null]));
    } else {
      out[field] = item[field] ?? null;
    }
  }
  return out;
}

/** Invocations one after another until the run finished (retries made due at once). */
export async function runToEnd(rt: WorkerRuntime, sql: Sql, runId: string, maxInvocations = 10): Promise<Json> {
  await invokeUntilFinished(rt, sql, runId, { maxInvocations, makeRetriesDue: true });
  return runOf(sql, runId);
}

/** One invocation (no run check): what the worker did. */
export function invokeOnce(rt: WorkerRuntime, name: string) {
  return runWorkerInvocation(rt, name);
}

/** A plan's items, by type and HubSpot id. */
export async function planItems(sql: Sql, planId: string): Promise<Map<string, Json>> {
  const rows = await sql`select * from public.publish_items where plan_id = ${planId} order by id`;
  return new Map(rows.map((r) => [`${r.content_type}/${r.hubspot_id}`, { ...r } as Json]));
}

/** Where the simulator's request log ends now (requestsByEndpoint counts from such a mark). */
export const logMark = (sim: HubSpotSimulator): number => sim.requestLog().length;

/** The portal's requests after `mark`, counted by endpoint (`POST /cms/pages/2026-03/site-pages/batch/read`). */
export function requestsByEndpoint(sim: HubSpotSimulator, p: SimPortal, mark = 0): Record<string, number> {
  const hash = tokenHash(p.token);
  const counts: Record<string, number> = {};
  for (const e of sim.requestLog().slice(mark)) {
    if (e.tokenHash !== hash) continue;
    counts[e.endpoint] = (counts[e.endpoint] ?? 0) + 1;
  }
  return counts;
}
