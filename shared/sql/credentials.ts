// Portal credentials (supabase/schemas/0380-0390): sealed tokens stored and
// looked up, the shared refresh (claim, complete, abandon under the refresh
// lease), disconnection, and key-rotation batches. Tokens pass through sealed:
// sealing and opening are shared/hubspot/token-sealing.ts's.
import type { Sql } from '../db.ts';

/** What connect_portal_with_tokens stores: sealed tokens under `keyId`; a private app's lookup hash; an OAuth token's lifetime. */
export interface SealedConnection {
  ownerId: string;
  hubspotPortalId: number | string;
  /** Null keeps a reconnected portal's name (a new one is "HubSpot portal <hub id>"). */
  name: string | null;
  authKind: 'private_app' | 'oauth';
  keyId: string;
  accessEnc: string;
  refreshEnc: string | null;
  expiresInSeconds: number | null;
  refreshMarginSeconds: number | null;
  lookupHash: string | null;
  scopes: readonly string[] | null;
}

/** Creates or updates the user's portal with sealed tokens (clearing a disconnected state); returns the portal id. */
export async function connectPortalWithTokens(sql: Sql, c: SealedConnection): Promise<string> {
  const [row] = await sql`select public.connect_portal_with_tokens(${c.ownerId}, ${String(c.hubspotPortalId)}, ${c.name}, ${c.authKind},
    ${c.keyId}, ${c.accessEnc}, ${c.refreshEnc}, ${c.expiresInSeconds}, ${c.refreshMarginSeconds},
    ${c.lookupHash}, ${c.scopes ? [...c.scopes] : null}::text[]) as id`;
  return row!.id as string;
}

/** The HubSpot portal id of the owner's portal storing a token with one of these lookup hashes, or null. */
export async function hubspotPortalForTokenHash(sql: Sql, ownerId: string, hashes: readonly string[]): Promise<string | null> {
  const [row] = await sql`select public.hubspot_portal_for_token_hash(${ownerId}, ${hashes as string[]}::text[])::text as id`;
  return (row?.id as string | null) ?? null;
}

/**
 * Marks the portal disconnected and fails its fetch jobs for good; returns how
 * many jobs failed. With `holder` only while it still holds the refresh lease:
 * null when the portal was reconnected or the refresh lease taken over (nothing changed).
 */
export async function disconnectPortal(sql: Sql, portalId: string, reason: string, holder?: string): Promise<number | null> {
  const [row] = await sql`select public.disconnect_portal(${portalId}, ${reason.slice(0, 400)}, ${holder ?? null}) as failed`;
  return row?.failed == null ? null : Number(row.failed);
}

/** The owner's disconnect, in one transaction: disconnect_portal, the stored tokens deleted, and the portal's state after. */
export async function disconnectPortalAndDeleteTokens(
  sql: Sql, portalId: string, reason: string,
): Promise<{ failed: number; disconnectedAt: Date; reason: string }> {
  return (await sql.begin(async (tx) => {
    const [r] = await tx`select public.disconnect_portal(${portalId}, ${reason}) as failed`;
    await tx`delete from private.portal_credentials where portal_id = ${portalId}`;
    const [p] = await tx`select disconnected_at, disconnected_reason from public.portals where id = ${portalId}`;
    return { failed: Number(r?.failed ?? 0), disconnectedAt: p?.disconnected_at as Date, reason: p?.disconnected_reason as string };
  })) as { failed: number; disconnectedAt: Date; reason: string };
}

/** claim_portal_token's answer: what to do (use the token, refresh it under the refresh lease, wait, or give up) and the sealed token. */
export interface TokenClaim {
  decision: 'use' | 'refresh' | 'wait' | 'disconnected';
  hubspot_portal_id: string;
  owner_id: string;
  auth_kind: 'private_app' | 'oauth';
  access_token_enc: string | null;
  access_token_legacy: string | null;
  refresh_token_enc: string | null;
  token_version: string;
  refresh_in_ms: string | null;
  expires_in_ms: string | null;
  disconnected_reason: string | null;
  disconnected_message: string | null;
  wait_ms: number | null;
}

/** claim_portal_token's answer to `holder`, asked already (with a schedule probe's claim) at `askedAt` (this clock): a token source's first look-up. */
export interface FirstTokenClaim {
  holder: string;
  claim: TokenClaim;
  askedAt: number;
}

/** A refresh lease holder for claim_portal_token: the caller's id and a random suffix (one token source, one holder). */
export function holderOf(holderId: string): string {
  return `${holderId.slice(0, 160)}#${crypto.randomUUID().slice(0, 8)}`;
}

/** One look at the portal's token for `holder` (`usedVersion`: the token HubSpot refused); null when the portal has no credentials. */
export async function claimPortalToken(
  sql: Sql, portalId: string, holder: string, usedVersion: string | null, refreshLeaseSeconds: number, minValidSeconds: number,
): Promise<TokenClaim | null> {
  const [row] = await sql<TokenClaim[]>`select * from public.claim_portal_token(${portalId}, ${holder}, ${usedVersion},
    ${refreshLeaseSeconds}, ${minValidSeconds})`;
  return row ?? null;
}

/** Stores the refreshed tokens (sealed under `keyId`) while `holder` holds the refresh lease: the new token version, or null when it was lost. */
export async function completeTokenRefresh(
  sql: Sql, portalId: string, holder: string,
  t: { keyId: string; accessEnc: string; refreshEnc: string; expiresInSeconds: number; refreshMarginSeconds: number },
): Promise<string | null> {
  const [done] = await sql`select public.complete_token_refresh(${portalId}, ${holder}, ${t.keyId},
    ${t.accessEnc}, ${t.refreshEnc}, ${t.expiresInSeconds}, ${t.refreshMarginSeconds}, null)::text as version`;
  return (done?.version as string | null | undefined) ?? null;
}

/** Gives the refresh lease back (the refresh did not happen). */
export async function abandonTokenRefresh(sql: Sql, portalId: string, holder: string): Promise<void> {
  await sql`select public.abandon_token_refresh(${portalId}, ${holder})`;
}

/** A credentials row not sealed under the current key (or legacy plaintext), as credentials_to_rotate hands it out. */
export interface CredentialsToRotate {
  portal_id: string;
  hubspot_portal_id: string;
  owner_id: string;
  auth_kind: string;
  key_id: string | null;
  access_token_enc: string | null;
  refresh_token_enc: string | null;
  access_token_legacy: string | null;
  token_version: string;
}

/** One batch of rows to re-seal under `currentKeyId`. */
export async function credentialsToRotate(sql: Sql, currentKeyId: string, batchSize: number): Promise<CredentialsToRotate[]> {
  return [...await sql<CredentialsToRotate[]>`select * from public.credentials_to_rotate(${currentKeyId}, ${batchSize})`];
}

/** A re-sealed row to write back (only if unchanged meanwhile), or one that could not be opened (`failed`: moved to the back). */
export type RotatedCredentials =
  | {
    portal_id: string; token_version: string; from_key_id: string | null; key_id: string;
    access_token_enc: string; refresh_token_enc: string | null; access_token_hash: string | null;
  }
  | { portal_id: string; failed: true };

/** Writes a batch back; returns how many rows were re-sealed. */
export async function rotateCredentials(sql: Sql, rows: readonly RotatedCredentials[]): Promise<number> {
  const [row] = await sql`select public.rotate_credentials(${sql.json(rows as never)}) as rotated`;
  return Number(row?.rotated ?? 0);
}
