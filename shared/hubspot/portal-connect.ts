// Connecting a portal: its tokens sealed for their place (token-sealing.ts) and
// stored by connect_portal_with_tokens, whether installed through OAuth or
// pasted as a private-app token; and which of the owner's portals stores a
// pasted token (by lookup hash, never in clear).
import type { Sql } from '../db.ts';
import { requireTokenKeys, tokenLookupHash, tokenLookupHashes, type TokenKeyring } from '../token-crypto.ts';
import { connectPortalWithTokens, hubspotPortalForTokenHash } from '../sql/credentials.ts';
import { TOKEN_REFRESH_DEFAULTS } from './portal-tokens.ts';
import { sealToken } from './token-sealing.ts';

export interface OAuthConnection {
  ownerId: string;
  hubspotPortalId: number | string;
  name: string;
  accessToken: string;
  refreshToken: string;
  /** The access token's lifetime as HubSpot gave it (`expires_in`). */
  expiresInSeconds: number;
  /** When the token request was sent (ms, this clock): the lifetime is counted from then. */
  requestedAt?: number;
  scopes?: readonly string[] | null;
  refreshMarginSeconds?: number;
}

/** Connects (or reconnects) a portal installed through OAuth; its tokens are stored sealed. Returns the portal id. */
export async function connectOAuthPortal(sql: Sql, keys: TokenKeyring | null, c: OAuthConnection): Promise<string> {
  const ring = requireTokenKeys(keys);
  const elapsed = c.requestedAt === undefined ? 0 : Math.max(0, Math.ceil((Date.now() - c.requestedAt) / 1000));
  const lifetime = Math.max(1, Math.floor(c.expiresInSeconds) - elapsed);
  const [accessEnc, refreshEnc] = await Promise.all([
    sealToken(ring, c.accessToken, 'access', c),
    sealToken(ring, c.refreshToken, 'refresh', c),
  ]);
  // No lookup hash: only pasted private-app tokens are looked up, and a hash here would change with every refresh.
  return connectPortalWithTokens(sql, {
    ownerId: c.ownerId, hubspotPortalId: c.hubspotPortalId, name: c.name, authKind: 'oauth', keyId: ring.currentKeyId, accessEnc, refreshEnc,
    expiresInSeconds: lifetime, refreshMarginSeconds: c.refreshMarginSeconds ?? TOKEN_REFRESH_DEFAULTS.refreshMarginSeconds, lookupHash: null,
    scopes: c.scopes ?? null,
  });
}

/** Connects (or reconnects) a portal with a private-app token, stored sealed. Returns the portal id. */
export async function connectPrivateAppPortal(
  sql: Sql,
  keys: TokenKeyring | null,
  c: { ownerId: string; hubspotPortalId: number | string; name: string | null; accessToken: string },
): Promise<string> {
  const ring = requireTokenKeys(keys);
  const [accessEnc, hash] = await Promise.all([
    sealToken(ring, c.accessToken, 'access', c),
    tokenLookupHash(ring, c.accessToken),
  ]);
  return connectPortalWithTokens(sql, {
    ownerId: c.ownerId, hubspotPortalId: c.hubspotPortalId, name: c.name, authKind: 'private_app', keyId: ring.currentKeyId, accessEnc,
    refreshEnc: null, expiresInSeconds: null, refreshMarginSeconds: null, lookupHash: hash, scopes: null,
  });
}

/**
 * The HubSpot portal id of the owner's portal that stores this access token
 * (compared by lookup hash, never in clear), or null. Null without keys.
 */
export async function knownHubSpotPortalForToken(sql: Sql, keys: TokenKeyring | null, ownerId: string, accessToken: string): Promise<string | null> {
  if (!keys) return null;
  const hashes = await tokenLookupHashes(keys, accessToken);
  return hubspotPortalForTokenHash(sql, ownerId, hashes);
}

