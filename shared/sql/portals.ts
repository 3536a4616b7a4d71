// Portals (supabase/schemas/0120) as the orchestrator reads them: as the user
// (RLS: only their own), or by owner and HubSpot portal for a reconnect.
import { asUser, type Sql, type UserClaims } from '../db.ts';

/** A portal as the user's own list shows it. */
export interface PortalRow {
  id: string;
  hubspot_portal_id: string;
  name: string;
  created_at: Date;
  auth_kind: 'private_app' | 'oauth';
  disconnected_at: Date | null;
  disconnected_reason: string | null;
}

/** The user's portal (RLS), or null when it is not theirs. */
export async function ownPortal(sql: Sql, claims: UserClaims, portalId: string): Promise<PortalRow | null> {
  const rows = await asUser(sql, claims, (tx) => tx<PortalRow[]>`select id, hubspot_portal_id, name, created_at, auth_kind,
    disconnected_at, disconnected_reason from public.portals where id = ${portalId}`);
  return rows[0] ?? null;
}

/** The user's portals, oldest first (at most 1000). */
export async function ownPortals(sql: Sql, claims: UserClaims): Promise<PortalRow[]> {
  return [...await asUser(sql, claims, (tx) => tx<PortalRow[]>`select id, hubspot_portal_id, name, created_at, auth_kind,
    disconnected_at, disconnected_reason from public.portals order by created_at, id limit 1000`)];
}

/** The name the owner gave this HubSpot portal, when it is connected to them already. */
export async function portalNameOf(sql: Sql, ownerId: string, hubspotPortalId: number): Promise<string | null> {
  const [row] = await sql`select name from public.portals where owner_id = ${ownerId} and hubspot_portal_id = ${hubspotPortalId}`;
  return (row?.name as string | undefined) ?? null;
}
