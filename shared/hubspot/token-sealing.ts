// A HubSpot token at rest: sealed (shared/token-crypto.ts) with additional data
// that binds it to its place, the owner and HubSpot portal of its row, so a
// ciphertext copied into another row does not open there. Used by connecting,
// the token source's refresh and key rotation.
import { decryptToken, encryptToken, type TokenKeyring } from '../token-crypto.ts';

/** The portal a sealed token belongs to: its owner and HubSpot portal. */
export interface TokenPlace {
  ownerId: string;
  hubspotPortalId: number | string;
}

/**
 * The additional data that binds a sealed token to its place. With the owner:
 * "<field>:<owner>:<hub id>", what every token is sealed with ("v2."); two users
 * connecting the same hub get ciphertexts that do not open in each other's rows.
 * Without: "<field>:<hub id>", what "v1." ciphertexts were sealed with.
 */
export function tokenContext(field: 'access' | 'refresh', hubspotPortalId: number | string, ownerId?: string): string {
  return ownerId === undefined ? `${field}:${String(hubspotPortalId)}` : `${field}:${ownerId}:${String(hubspotPortalId)}`;
}

/** Seals a token for its place (current key, current format). */
export function sealToken(keys: TokenKeyring, token: string, field: 'access' | 'refresh', place: TokenPlace): Promise<string> {
  return encryptToken(keys, token, tokenContext(field, place.hubspotPortalId, place.ownerId));
}

/** Opens a stored sealed token of either format. Throws TokenDecryptionError. */
export function openStoredToken(keys: TokenKeyring, sealed: string, field: 'access' | 'refresh', place: TokenPlace): Promise<string> {
  return decryptToken(keys, sealed, (format) => tokenContext(field, place.hubspotPortalId, format === 'v1' ? undefined : place.ownerId));
}

