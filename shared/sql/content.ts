// Stored content (supabase/schemas/0160): how many live items (tombstones not
// counted) a portal holds per content type, read as the user so RLS decides.
// The count is taken from the content itself, never from a job's progress (a
// changes-only job's `done` is what it checked, not what is stored), and no
// per-type counter is kept beside it: storing an item stays as it was. One
// statement, an index-only scan of hubspot_content_live_idx, which carries
// owner_id for RLS's `owner_id = auth.uid()`: ~7 ms warm (~10 ms cold) for a
// portal of 41,705 items, Heap Fetches 0 (EXPLAIN ANALYZE, docs/decisions/0066).
// The page reads it on load and when a fetch job or run ends, not on every refresh.
import type { ContentType } from '../content-types.ts';
import { asUser, type Sql, type UserClaims } from '../db.ts';

/**
 * Live stored items per content type of the portal, as the user sees them (RLS);
 * types with none are absent. null when the portal is not the user's (or does not exist).
 */
export async function storedContentCounts(sql: Sql, claims: UserClaims, portalId: string): Promise<Map<ContentType, number> | null> {
  return asUser(sql, claims, async (tx) => {
    const [portal] = await tx`select 1 from public.portals where id = ${portalId}`;
    if (!portal) return null;
    const rows = await tx<{ content_type: ContentType; items: number }[]>`select content_type, count(*)::int as items
      from public.hubspot_content where portal_id = ${portalId} and deleted_at is null group by content_type`;
    return new Map(rows.map((r) => [r.content_type, r.items]));
  });
}
