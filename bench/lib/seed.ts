// Seeding through our schema with plain SQL (generate_series): users, portals,
// runs and jobs exactly as create_run would leave them, and finished history.
//
// Two shapes. One job per run (8 content types per portal, each in its own
// run): a job's completion locks its run row and settles it, so no two
// workers ever wait on the same run row and the figure is the queue's own
// cost — the worst case for settlement, a run finished per job. Runs of 8
// (one run per portal with all 8 types): the realistic shape.
import type postgres from 'postgres';
import { CONTENT_TYPES } from '../../shared/content-types.ts';

type Sql = postgres.Sql;

const TYPES = `array[${CONTENT_TYPES.map((t) => `'${t}'`).join(',')}]::text[]`;
/** A deterministic uuid from an integer and a one-hex-digit entity tag. */
const uuidOf = (tag: string, expr: string) => `('${tag}0000000-0000-4000-8000-' || lpad(to_hex(${expr}), 12, '0'))::uuid`;

/** Users 1..n (ids from `first`) with one portal each (HubSpot portal id 100000 + i); no credentials. */
export async function seedUsersAndPortals(sql: Sql, first: number, count: number): Promise<void> {
  await sql.unsafe(`
    insert into auth.users (id, email, aud, role)
    select ${uuidOf('a', 'i')}, 'bench-' || i || '@example.test', 'authenticated', 'authenticated'
      from generate_series(${first}, ${first + count - 1}) i`);
  await sql.unsafe(`
    insert into public.portals (id, owner_id, hubspot_portal_id, name)
    select ${uuidOf('b', 'i')}, ${uuidOf('a', 'i')}, 100000 + i, 'Bench portal ' || i
      from generate_series(${first}, ${first + count - 1}) i`);
}

/**
 * Pending jobs for portals first..first+count-1: one run per (portal, content
 * type), one job per run, 8 per portal. Returns how many jobs were created.
 */
export async function seedPendingJobs(sql: Sql, first: number, count: number, kind: 'fetch' | 'export' = 'fetch'): Promise<number> {
  await sql.unsafe(`
    insert into public.runs (id, portal_id, owner_id, requested_by, kind, content_types, jobs_total)
    select md5('run-' || i || '-' || t.ord || '-' || clock_timestamp())::uuid, ${uuidOf('b', 'i')}, ${uuidOf('a', 'i')}, ${uuidOf('a', 'i')},
           '${kind}', array[t.type], 1
      from generate_series(${first}, ${first + count - 1}) i
      cross join unnest(${TYPES}) with ordinality as t(type, ord)
     order by t.ord, i`);
  const res = await sql.unsafe(`
    insert into public.jobs (run_id, portal_id, owner_id, kind, content_type)
    select r.id, r.portal_id, r.owner_id, r.kind, r.content_types[1]
      from public.runs r
     where r.status = 'pending' and r.portal_id in (select ${uuidOf('b', 'i')} from generate_series(${first}, ${first + count - 1}) i)
     order by r.created_at, r.id`);
  return res.count;
}

/**
 * The realistic shape: one run of 8 jobs per portal (all 8 content types), as
 * create_run leaves them (each run's jobs inserted together). Returns how many
 * jobs were created.
 */
export async function seedPendingRunsOf8(sql: Sql, first: number, count: number, kind: 'fetch' | 'export' = 'fetch'): Promise<number> {
  await sql.unsafe(`
    insert into public.runs (id, portal_id, owner_id, requested_by, kind, content_types, jobs_total)
    select md5('run8-' || i || '-' || clock_timestamp())::uuid, ${uuidOf('b', 'i')}, ${uuidOf('a', 'i')}, ${uuidOf('a', 'i')},
           '${kind}', ${TYPES}, 8
      from generate_series(${first}, ${first + count - 1}) i`);
  const res = await sql.unsafe(`
    insert into public.jobs (run_id, portal_id, owner_id, kind, content_type)
    select r.id, r.portal_id, r.owner_id, r.kind, t.type
      from public.runs r
     cross join unnest(r.content_types) with ordinality as t(type, ord)
     where r.status = 'pending' and r.portal_id in (select ${uuidOf('b', 'i')} from generate_series(${first}, ${first + count - 1}) i)
     order by r.portal_id, t.ord`);
  return res.count;
}

/**
 * `jobs` finished jobs (completed, 1 attempt, a fetch-like result) in finished
 * runs of 1,000 jobs, spread over the portals 1..portals. The jobs are one
 * INSERT ... SELECT over generate_series, in one transaction. Triggers are
 * skipped: the rows are consistent by construction, and the caller can check
 * with `historyOrphans`. Where the role may (a superuser), foreign-key
 * triggers too (session_replication_role = replica; 4x faster for 1M rows);
 * elsewhere — hosted Supabase's `postgres` is no superuser — the table owner
 * disables its own triggers for the transaction and the foreign keys are checked.
 */
export async function seedFinishedHistory(sql: Sql, jobs: number, portals: number): Promise<void> {
  const runs = Math.ceil(jobs / 1000);
  await sql.begin(async (tx) => {
    const replica = await replicaMode(tx);
    if (!replica) await tx.unsafe('alter table public.runs disable trigger user; alter table public.jobs disable trigger user');
    await tx.unsafe(`
      insert into public.runs (id, portal_id, owner_id, requested_by, kind, status, content_types,
                               jobs_total, jobs_completed, created_at, started_at, finished_at)
      select ${uuidOf('c', 'k')}, ${uuidOf('b', `1 + k % ${portals}`)}, ${uuidOf('a', `1 + k % ${portals}`)}, ${uuidOf('a', `1 + k % ${portals}`)},
             'fetch', 'completed', ${TYPES}, 1000, 1000,
             now() - interval '60 days' + k * interval '1 minute', now() - interval '60 days' + k * interval '1 minute',
             now() - interval '60 days' + k * interval '1 minute' + interval '50 seconds'
        from generate_series(1, ${runs}) k`);
    await tx.unsafe(`
      insert into public.jobs (run_id, portal_id, owner_id, kind, content_type, status, attempts, worker_id, fencing_token,
                               run_after, progress_done, progress_total, checkpoint, result, created_at, started_at, finished_at, updated_at)
      select ${uuidOf('c', 'k')}, ${uuidOf('b', `1 + k % ${portals}`)}, ${uuidOf('a', `1 + k % ${portals}`)}, 'fetch',
             (${TYPES})[1 + i % 8], 'completed', 1, 'history-worker/' || (i % 16), i,
             ts, 100 + i % 50, 100 + i % 50, jsonb_build_object('after', null, 'finished', true),
             jsonb_build_object('fetched', 100 + i % 50, 'added', i % 7, 'updated', i % 5, 'unchanged', 90, 'pages', 1 + i % 3, 'deleted', 0),
             ts, ts + interval '1 second', ts + interval '3 seconds', ts + interval '3 seconds'
        from generate_series(1, ${jobs}) i
        cross join lateral (select 1 + (i - 1) / 1000 as k, now() - interval '60 days' + i * interval '3 seconds' as ts) x`);
    if (!replica) await tx.unsafe('alter table public.runs enable trigger user; alter table public.jobs enable trigger user');
  });
}

/**
 * Turns every trigger off for the rest of the transaction (replica mode) if
 * the role may set session_replication_role (a superuser, or granted SET on it);
 * false, with the transaction unharmed, if it may not.
 */
async function replicaMode(tx: postgres.TransactionSql): Promise<boolean> {
  try {
    await tx.savepoint((sp) => sp.unsafe('set local session_replication_role = replica'));
    return true;
  } catch (e) {
    if ((e as { code?: string }).code === '42501') return false; // insufficient_privilege
    throw e;
  }
}

/** Jobs whose run or portal does not exist (should be 0). */
export async function historyOrphans(sql: Sql): Promise<number> {
  const [row] = await sql`select count(*)::int as n from public.jobs j
    where not exists (select 1 from public.runs r where r.id = j.run_id)
       or not exists (select 1 from public.portals p where p.id = j.portal_id and p.owner_id = j.owner_id)`;
  return Number(row?.n ?? -1);
}

/** Realistic-looking fetched content for one portal and type (for the export scenario). */
export async function seedContent(sql: Sql, portalIndex: number, contentType: string, count: number): Promise<void> {
  await sql.unsafe(`
    insert into public.hubspot_content (portal_id, owner_id, content_type, hubspot_id, data, hubspot_updated_at)
    select ${uuidOf('b', String(portalIndex))}, ${uuidOf('a', String(portalIndex))}, '${contentType}', (41000000000 + i)::text,
           jsonb_build_object(
             'id', (41000000000 + i)::text, 'name', 'Page ' || i || ' - ' || repeat('lorem ipsum ', 3),
             'slug', 'section-' || (i % 40) || '/page-' || i, 'htmlTitle', 'Title of page ' || i,
             'metaDescription', repeat('A description of the page, with "quotes", commas and more. ', 3),
             'state', case when i % 10 = 0 then 'DRAFT' else 'PUBLISHED' end, 'currentState', 'PUBLISHED',
             'url', 'https://www.example.com/section-' || (i % 40) || '/page-' || i, 'domain', 'www.example.com',
             'language', 'en', 'authorName', 'Author ' || (i % 25), 'publishDate', '2024-03-01T10:00:00Z',
             'created', '2023-01-01T00:00:00Z', 'updated', '2025-01-01T00:00:00Z', 'archivedAt', null,
             'templatePath', '@hubspot/growth/templates/page.html', 'tagIds', jsonb_build_array(i % 60, i % 13),
             'widgets', jsonb_build_object('body', jsonb_build_object('html', repeat('<p>Body text of page ' || i || ', a paragraph of content.</p>', 24)))),
           now() - (i % 1000) * interval '1 hour'
      from generate_series(1, ${count}) i`);
}

/** The ids `seedUsersAndPortals` gives user/portal i. */
export function benchIds(i: number): { userId: string; portalId: string; hubspotPortalId: number } {
  const hex = i.toString(16).padStart(12, '0');
  return { userId: `a0000000-0000-4000-8000-${hex}`, portalId: `b0000000-0000-4000-8000-${hex}`, hubspotPortalId: 100000 + i };
}
