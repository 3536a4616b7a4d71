// Key rotation for the sealed HubSpot credentials, without downtime: every
// function decrypts with any key listed in HUBSPOT_TOKEN_KEYS and encrypts with
// the first, and this step re-seals rows still under another key (or still in
// plaintext, from before encryption, or in the first sealed format "v1.") in bounded batches: one SQL call reads a
// batch, the functions re-seal it, one SQL call writes it back, each row only if
// no refresh changed it meanwhile. The worker runs one batch per invocation;
// `rotateAllCredentials` runs batches until none is left.
import type { Sql } from '../db.ts';
import { openStoredToken, sealToken } from './token-sealing.ts';
import { credentialsToRotate, rotateCredentials, type RotatedCredentials } from '../sql/credentials.ts';
import { tokenLookupHash, type TokenKeyring } from '../token-crypto.ts';

export const ROTATION_BATCH_SIZE = 20;

export interface RotationBatch {
  /** Rows the batch looked at (0: nothing is left under another key or in plaintext). */
  seen: number;
  /** Rows re-sealed under the current key. */
  rotated: number;
  /** Rows that could not be opened (their key is not configured, or it is the wrong one); moved to the back. */
  unreadable: number;
  /** Those rows' portal ids. */
  unreadablePortals: string[];
}

/** Re-seals one batch of credentials under the current key (legacy plaintext rows included). */
export async function rotateCredentialsBatch(sql: Sql, keys: TokenKeyring, batchSize = ROTATION_BATCH_SIZE): Promise<RotationBatch> {
  const rows = await credentialsToRotate(sql, keys.currentKeyId, batchSize);
  if (rows.length === 0) return { seen: 0, rotated: 0, unreadable: 0, unreadablePortals: [] };
  const updates = await Promise.all(rows.map(async (r): Promise<RotatedCredentials> => {
    const place = { ownerId: r.owner_id, hubspotPortalId: r.hubspot_portal_id };
    try {
      const access = r.access_token_enc !== null ? await openStoredToken(keys, r.access_token_enc, 'access', place) : r.access_token_legacy!;
      const refresh = r.refresh_token_enc !== null ? await openStoredToken(keys, r.refresh_token_enc, 'refresh', place) : null;
      return {
        portal_id: r.portal_id,
        token_version: r.token_version,
        from_key_id: r.key_id,
        key_id: keys.currentKeyId,
        access_token_enc: await sealToken(keys, access, 'access', place),
        refresh_token_enc: refresh === null ? null : await sealToken(keys, refresh, 'refresh', place),
        // Only private-app tokens are looked up by hash (a pasted token); OAuth access tokens change with every refresh.
        access_token_hash: r.auth_kind === 'private_app' ? await tokenLookupHash(keys, access) : null,
      };
    } catch {
      return { portal_id: r.portal_id, failed: true };
    }
  }));
  const rotated = await rotateCredentials(sql, updates);
  const unreadablePortals = updates.filter((u) => 'failed' in u).map((u) => u.portal_id);
  return { seen: rows.length, rotated, unreadable: unreadablePortals.length, unreadablePortals };
}

/**
 * Runs batches until every row is under the current key, or only rows that
 * cannot be opened with the configured keys are left (each reported once), or a
 * batch changes nothing (refreshes won every row: they seal with the current key).
 */
export async function rotateAllCredentials(sql: Sql, keys: TokenKeyring, batchSize = ROTATION_BATCH_SIZE): Promise<RotationBatch> {
  const total: RotationBatch = { seen: 0, rotated: 0, unreadable: 0, unreadablePortals: [] };
  const unreadable = new Set<string>();
  for (;;) {
    const b = await rotateCredentialsBatch(sql, keys, batchSize);
    total.seen += b.seen;
    total.rotated += b.rotated;
    const fresh = b.unreadablePortals.filter((p) => !unreadable.has(p));
    fresh.forEach((p) => unreadable.add(p));
    if (b.seen === 0 || (b.rotated === 0 && fresh.length === 0)) break;
  }
  total.unreadablePortals = [...unreadable];
  total.unreadable = unreadable.size;
  return total;
}
