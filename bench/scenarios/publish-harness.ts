// Pieces of scenario 13 (publish): a portal's copy fetched by the real worker,
// edits written as the owner writes them (supabase-js under RLS: one INSERT …
// SELECT over the copy), a run played to its end by the worker in the local
// edge runtime, the portal's HubSpot requests sorted by what they were for
// (from the simulator's request log), and the items as HubSpot has them, read
// back over HTTP at a pace well under the portal's limit.
import { setTimeout as sleep } from 'node:timers/promises';
import type { LocalSystem } from '../../local/system.ts';
import { tokenHash, type RequestLogEntry } from '../../hubspot-sim/server.ts';
import type { ContentType } from '../../shared/content-types.ts';
import { asUser, type Sql } from '../../shared/db.ts';
import {
  batchReadBody, batchReadPath, hubdbRowsReadPath, redirectPath, WRITE_ENDPOINTS, type BatchContentType, type WriteEndpointKind,
} from '../../shared/hubspot/write-endpoints.ts';
import { createRun } from '../../shared/sql/runs.ts';
import type { BenchPortal } from '../lib/edge.ts';

export type Json = Record<string, any>;

/** One worker invocation in the background, as pg_cron's net.http_post sends it. */
export async function invokeWorker(sys: LocalSystem): Promise<void> {
  await fetch(sys.functions.functionUrl('worker'), {
    method: 'POST', headers: { Authorization: `Bearer ${sys.workerSecret}`, 'Content-Type': 'application/json' },
    body: JSON.stringify({ source: 'cron', mode: 'background' }),
  }).then((r) => r.body?.cancel()).catch(() => {});
}

/**
 * Wakes the worker and waits until the run has finished (its status); a
 * worker invocation every 60 s meanwhile, as cron would. The worker continues
 * itself after a budget's end or an isolate's shutdown.
 */
export async function runToEnd(sql: Sql, sys: LocalSystem, runId: string, timeoutMs: number): Promise<string> {
  await invokeWorker(sys);
  const deadline = performance.now() + timeoutMs;
  let lastWake = performance.now();
  for (;;) {
    const [run] = await sql`select status, finished_at from public.runs where id = ${runId}`;
    if (run?.finished_at) return String(run.status);
    if (performance.now() > deadline) throw new Error(`run ${runId} did not finish within ${Math.round(timeoutMs / 1000)} s (status ${String(run?.status)})`);
    if (performance.now() - lastWake > 60_000) {
      lastWake = performance.now();
      await invokeWorker(sys);
    }
    await sleep(100);
  }
}

/** The portal's copy of `types`, fetched by the real worker (a full fetch run); throws unless it completed. */
export async function fetchCopy(sql: Sql, sys: LocalSystem, portal: BenchPortal, types: readonly ContentType[], timeoutMs: number): Promise<void> {
  const r = await createRun(sql, { portalId: portal.portalId, requestedBy: portal.userId, kind: 'fetch', contentTypes: types });
  if (!r.runId) throw new Error(`fetch run not created: ${JSON.stringify(r)}`);
  const status = await runToEnd(sql, sys, r.runId, timeoutMs);
  if (status !== 'completed') throw new Error(`the fetch of ${types.join(', ')} ended ${status}`);
}

/** The patch the bench's edit of an item sets (fields of HubSpot's update schemas), as SQL over the copy's row `c`. */
function patchSql(type: ContentType): string {
  switch (type) {
    case 'site_pages': case 'landing_pages':
      return `jsonb_build_object('htmlTitle', 'Edited title ' || c.hubspot_id, 'metaDescription', 'Edited description ' || c.hubspot_id)`;
    case 'blog_posts': return `jsonb_build_object('htmlTitle', 'Edited post ' || c.hubspot_id, 'postSummary', 'Edited summary ' || c.hubspot_id)`;
    case 'blog_authors': return `jsonb_build_object('bio', 'Edited bio ' || c.hubspot_id)`;
    case 'blog_tags': return `jsonb_build_object('name', 'Edited tag ' || c.hubspot_id)`;
    case 'hubdb_rows': return `jsonb_build_object('values', jsonb_build_object('name', 'Edited row ' || c.hubspot_id, 'price', 10 + length(c.hubspot_id)))`;
    case 'url_redirects': return `jsonb_build_object('destination', 'https://example.test/moved/' || c.hubspot_id, 'precedence', 100 + length(c.hubspot_id))`;
    default: throw new Error(`${type} is not editable`);
  }
}

/** The field an edit of the type sets first: what a conflicting edit "in HubSpot" changes too. */
export function firstField(type: ContentType): string {
  switch (type) {
    case 'site_pages': case 'landing_pages': case 'blog_posts': return 'htmlTitle';
    case 'blog_authors': return 'bio';
    case 'blog_tags': return 'name';
    default: throw new Error(`${type}: no first field here`);
  }
}

/**
 * Pending edits of `n` live items of a type (a spread of the copy: ordered by
 * a hash of the id; HubDB rows and redirects in id order), written as the
 * owner through RLS in one statement: their targets by HubSpot id.
 */
export async function seedEdits(sql: Sql, portal: BenchPortal, type: ContentType, n: number): Promise<Map<string, Json>> {
  const order = type === 'hubdb_rows' || type === 'url_redirects' ? 'c.hubspot_id' : 'md5(c.hubspot_id)';
  const rows = await asUser(sql, { sub: portal.userId, role: 'authenticated', aud: 'authenticated' }, (tx) => tx.unsafe(`
    insert into public.content_edits (portal_id, content_type, hubspot_id, base_updated_at, patch)
    select c.portal_id, c.content_type, c.hubspot_id, c.hubspot_updated_at, ${patchSql(type)}
      from public.hubspot_content c
     where c.portal_id = $1 and c.content_type = $2 and c.deleted_at is null
     order by ${order} limit $3
    returning hubspot_id, patch`, [portal.portalId, type, n]));
  if (rows.length !== n) throw new Error(`${type}: ${rows.length} edits written, ${n} wanted (the copy is too small)`);
  return new Map(rows.map((r) => [String(r.hubspot_id), r.patch as Json]));
}

/** What a request of a publish was for. */
export type RequestPurpose = 'read' | 'write' | 'window' | 'other';

/** Endpoint kinds by the simulator's stats key (method and template, without a trailing slash). */
const KIND_BY_KEY = new Map<string, WriteEndpointKind>(WRITE_ENDPOINTS.map((e) => [`${e.method} ${e.template.replace(/\/$/, '')}`, e.kind]));

/** Content types by the simulator's stats key (the audit log: null). */
const TYPE_BY_KEY = new Map<string, ContentType | null>(WRITE_ENDPOINTS.map((e) => [`${e.method} ${e.template.replace(/\/$/, '')}`, e.type]));

/** The content type an endpoint reads or writes (null: the audit log, or not a publish endpoint). */
export function typeOf(endpoint: string): ContentType | null {
  return TYPE_BY_KEY.get(endpoint.replace(/\/$/, '')) ?? null;
}

/**
 * Per content type, when its job's re-reads and writes ran (seconds from `t0`;
 * the window check's requests left out) and how long its batches took: the re-read → write gap (the window: the prepare in
 * Postgres between them) and the write → next re-read gap (the record, the
 * next items and the budget's grant), medians over the type's batches.
 */
export function batchTimeline(entries: readonly (RequestLogEntry & { purpose: RequestPurpose })[], t0: number) {
  const out: Record<string, { requests: number; firstS: number; lastS: number; readToWriteMs: number; writeToReadMs: number }> = {};
  const median = (xs: number[]) => (xs.length ? [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]! : Number.NaN);
  const byType = new Map<string, typeof entries[number][]>();
  for (const e of entries) {
    const type = typeOf(e.endpoint);
    if (type && (e.purpose === 'read' || e.purpose === 'write')) byType.set(type, [...(byType.get(type) ?? []), e]);
  }
  for (const [type, list] of byType) {
    const gaps = { rw: [] as number[], wr: [] as number[] };
    for (let i = 1; i < list.length; i++) {
      const [a, b] = [list[i - 1]!, list[i]!];
      if (a.purpose === 'read' && b.purpose === 'write') gaps.rw.push(b.at - a.at);
      if (a.purpose === 'write' && b.purpose === 'read') gaps.wr.push(b.at - a.at);
    }
    out[type] = {
      requests: list.length, firstS: (list[0]!.at - t0) / 1000, lastS: (list.at(-1)!.at - t0) / 1000,
      readToWriteMs: median(gaps.rw), writeToReadMs: median(gaps.wr),
    };
  }
  return out;
}

/**
 * A plan's read and an apply's re-read (`batch/read`, a HubDB rows read, a
 * redirect GET), a write (`batch/update`, HubDB draft update and publish, a
 * redirect PATCH, a draft PATCH or push-live), or the window check (the audit
 * log's pages and revision reads).
 */
export function purposeOf(endpoint: string): RequestPurpose {
  switch (KIND_BY_KEY.get(endpoint.replace(/\/$/, ''))) {
    case 'batch_read': case 'hubdb_rows_read': case 'hubdb_draft_rows_read': case 'redirect_read': case 'draft_read': return 'read';
    case 'batch_update': case 'hubdb_draft_rows_update': case 'hubdb_publish': case 'redirect_update': case 'draft_update':
    case 'push_live': case 'schedule': case 'restore': return 'write';
    case 'audit_logs': case 'revisions': return 'window';
    default: return 'other';
  }
}

/** The portal's requests between two Date.now() marks, with their purpose. */
export function portalRequests(log: readonly RequestLogEntry[], portal: BenchPortal, fromMs: number, toMs: number): (RequestLogEntry & { purpose: RequestPurpose })[] {
  const hash = tokenHash(portal.token);
  return log.filter((e) => e.tokenHash === hash && e.at >= fromMs && e.at <= toMs).map((e) => ({ ...e, purpose: purposeOf(e.endpoint) }));
}

/** Counts by purpose (and by endpoint, for the notes). */
export function countRequests(entries: readonly (RequestLogEntry & { purpose: RequestPurpose })[]): Record<RequestPurpose, number> & { byEndpoint: Record<string, number>; rateLimited: number } {
  const out = { read: 0, write: 0, window: 0, other: 0, byEndpoint: {} as Record<string, number>, rateLimited: 0 };
  for (const e of entries) {
    out[e.purpose]++;
    out.byEndpoint[e.endpoint] = (out.byEndpoint[e.endpoint] ?? 0) + 1;
    if (e.status === 429) out.rateLimited++;
  }
  return out;
}

/**
 * The items as HubSpot has them now, by our ids (HubDB rows `<tableId>:<rowId>`),
 * read over HTTP with the portal's token, one request per `paceMs` at most
 * (the bench's reads stay far under the portal's limit).
 */
export async function hubspotNow(baseUrl: string, portal: BenchPortal, type: ContentType, ids: readonly string[], paceMs = 120): Promise<Map<string, Json>> {
  const out = new Map<string, Json>();
  let next = 0;
  const call = async (method: string, path: string, body?: unknown): Promise<Json | null> => {
    let res: Response;
    let text: string;
    // A 429 (the portal's own work just spent its ten-second window) is waited out: these reads are not measured.
    for (let attempt = 1; ; attempt++) {
      await sleep(Math.max(0, next - performance.now()));
      next = performance.now() + paceMs;
      res = await fetch(`${baseUrl}${path}`, {
        method, headers: { Authorization: `Bearer ${portal.token}`, 'Content-Type': 'application/json' },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      text = await res.text();
      if (res.status !== 429 || attempt >= 30) break;
      next = performance.now() + 1_000;
    }
    if (res.status === 404) return null;
    if (res.status !== 200) throw new Error(`${method} ${path} answered ${res.status}: ${text.slice(0, 200)}`);
    return JSON.parse(text) as Json;
  };
  if (type === 'url_redirects') {
    for (const id of ids) {
      const r = await call('GET', redirectPath(id));
      if (r) out.set(id, r);
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
      for (let i = 0; i < rows.length; i += 100) {
        const r = await call('POST', hubdbRowsReadPath(table), batchReadBody(rows.slice(i, i + 100)));
        for (const item of (r?.['results'] ?? []) as Json[]) out.set(`${table}:${String(item['id'])}`, item);
      }
    }
    return out;
  }
  for (let i = 0; i < ids.length; i += 100) {
    const r = await call('POST', batchReadPath(type as BatchContentType), batchReadBody(ids.slice(i, i + 100)));
    for (const item of (r?.['results'] ?? []) as Json[]) out.set(String(item['id']), item);
  }
  return out;
}

/** HubSpot's values of the fields a patch sets (a HubDB row's values only by the patch's columns). */
export function fieldsOf(item: Json | undefined, patch: Json): Json {
  const out: Json = {};
  for (const [field, value] of Object.entries(patch)) {
    if (field === 'values' && value && typeof value === 'object') {
      out[field] = Object.fromEntries(Object.keys(value as Json).map((k) => [k, item?.['values']?.[k] ?? null]));
    } else {
      out[field] = item?.[field] ?? null;
    }
  }
  return out;
}

/** Whether two JSON values are equal (objects by their keys, in any order). */
export function sameJson(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (a === null || b === null || typeof a !== 'object' || typeof b !== 'object') return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  const ka = Object.keys(a as Json);
  const kb = Object.keys(b as Json);
  return ka.length === kb.length && ka.every((k) => sameJson((a as Json)[k], (b as Json)[k]));
}

/** A small seeded generator: the items picked for injected edits are the same on every run. */
export function seeded(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s * 1_664_525 + 1_013_904_223) >>> 0;
    return s / 2 ** 32;
  };
}

/** `n` distinct elements of `from`, picked with `random`. */
export function pick<T>(from: readonly T[], n: number, random: () => number): T[] {
  const pool = [...from];
  const out: T[] = [];
  while (out.length < n && pool.length > 0) out.push(pool.splice(Math.floor(random() * pool.length), 1)[0]!);
  return out;
}
