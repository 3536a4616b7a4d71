// A portal's stored items per content type (shared/sql/content.ts, GET
// /orchestrator/content, the page's content overview): live items only,
// tombstones not counted, the owner's portal only (RLS), and read by an
// index-only scan of hubspot_content_live_idx under RLS, so the count stays a
// few milliseconds for a 40k-item portal (no heap page is read).
import { describe, expect, it } from 'vitest';
import { asUser, type UserClaims } from '../shared/db.ts';
import { storedContentCounts } from '../shared/sql/content.ts';
import { createUserWithPortal, useTestDatabase } from './support/database.ts';

const db = useTestDatabase();
const claimsOf = (userId: string): UserClaims => ({ sub: userId, role: 'authenticated' });

/** Stores `n` items of a type for the portal (ids from `from`), `deleted` of them as tombstones. */
async function store(portalId: string, ownerId: string, type: string, n: number, opts: { from?: number; deleted?: number; pad?: number } = {}) {
  const from = opts.from ?? 1;
  // Committed synchronously: the test cluster commits asynchronously, and VACUUM can mark a page all-visible
  // only once the commit of its rows is flushed (as it always is with synchronous_commit on, the default).
  await db.sql.begin(async (tx) => {
    await tx`set local synchronous_commit = on`;
    await tx`insert into public.hubspot_content (portal_id, owner_id, content_type, hubspot_id, data, deleted_at)
      select ${portalId}, ${ownerId}, ${type}, g::text, jsonb_build_object('id', g, 'body', repeat(md5(g::text), ${opts.pad ?? 1})),
             case when g < ${from + (opts.deleted ?? 0)} then now() end
        from generate_series(${from}::int, ${from + n - 1}::int) g`;
  });
}

/** The plan nodes of an EXPLAIN (FORMAT JSON), flattened. */
function nodesOf(plan: Record<string, unknown>): Record<string, unknown>[] {
  return [plan, ...((plan.Plans as Record<string, unknown>[] | undefined) ?? []).flatMap(nodesOf)];
}

describe('stored content counts', () => {
  it('counts the live items of each type of the owner\'s portal: tombstones, other portals and other owners not counted', async () => {
    const a = await createUserWithPortal(db.sql);
    const b = await createUserWithPortal(db.sql);
    await store(a.portalId, a.userId, 'site_pages', 5, { deleted: 2 });
    await store(a.portalId, a.userId, 'blog_posts', 3);
    await store(a.portalId, a.userId, 'url_redirects', 2, { deleted: 2 }); // every one deleted
    await store(b.portalId, b.userId, 'site_pages', 7);

    expect(await storedContentCounts(db.sql, claimsOf(a.userId), a.portalId)).toEqual(new Map([['site_pages', 3], ['blog_posts', 3]]));
    expect(await storedContentCounts(db.sql, claimsOf(b.userId), b.portalId)).toEqual(new Map([['site_pages', 7]]));
    // Another user's portal is not found (RLS), not counted as empty.
    expect(await storedContentCounts(db.sql, claimsOf(a.userId), b.portalId)).toBeNull();
    expect(await storedContentCounts(db.sql, claimsOf(b.userId), a.portalId)).toBeNull();
    expect(await storedContentCounts(db.sql, claimsOf(a.userId), crypto.randomUUID())).toBeNull();
  });

  it('reads no heap page: an index-only scan of hubspot_content_live_idx under RLS, whatever the items weigh', async () => {
    const a = await createUserWithPortal(db.sql);
    const b = await createUserWithPortal(db.sql);
    // Items of ~1 KB, as HubSpot's are (2.4 KB on average), for two portals.
    for (const [p, n] of [[a, 3000], [b, 3000]] as const) {
      await store(p.portalId, p.userId, 'site_pages', n, { deleted: 100, pad: 32 });
      await store(p.portalId, p.userId, 'blog_posts', n, { from: 100_000, pad: 32 });
    }
    // The index-only scan is the plan once VACUUM has marked the pages all-visible, as autovacuum keeps them.
    // It cannot while any transaction or a replication slot being created (other test files' Realtime) holds
    // the cluster's horizon back, and the planner then rightly reads the heap: vacuum again until it could.
    let visibility = { relpages: 0, relallvisible: -1 };
    for (let i = 0; i < 100 && visibility.relallvisible < visibility.relpages; i++) {
      if (i > 0) await new Promise((r) => setTimeout(r, 100));
      await db.sql`vacuum analyze public.hubspot_content`;
      [visibility] = (await db.sql`select relpages, relallvisible from pg_class where oid = 'public.hubspot_content'::regclass`) as unknown as [typeof visibility];
    }
    expect(visibility.relallvisible, 'VACUUM marked every page all-visible').toBe(visibility.relpages);
    const explained = await asUser(db.sql, claimsOf(a.userId), (tx) => tx.unsafe(
      `explain (analyze, format json) select content_type, count(*)::int as items from public.hubspot_content
        where portal_id = $1 and deleted_at is null group by content_type`, [a.portalId]));
    const nodes = nodesOf((explained[0]!['QUERY PLAN'] as { Plan: Record<string, unknown> }[])[0]!.Plan);
    const scans = nodes.filter((n) => /Scan/.test(String(n['Node Type'])));
    expect(scans.map((n) => [n['Node Type'], n['Index Name'], n['Heap Fetches']]), JSON.stringify(nodes)).toEqual([
      ['Index Only Scan', 'hubspot_content_live_idx', 0],
    ]);
    expect(scans[0]!['Actual Rows']).toBe(2900 + 3000);
  });
});
