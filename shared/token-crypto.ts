// HubSpot tokens encrypted at rest: AES-256-GCM with Web Crypto (Node and Deno),
// keys from a function secret, never from the database. A database dump holds
// only ciphertext, each naming the key it was sealed with.
//
// Secret format: HUBSPOT_TOKEN_KEYS="keyId:base64key,olderId:base64key" — the
// first key is current (encrypts), every listed key decrypts. A key is 32 random
// bytes (`openssl rand -base64 32`); a key id is 1-32 of [A-Za-z0-9_-].
// Sealed form: "v2.<keyId>.<iv, base64url>.<ciphertext+tag, base64url>". The
// AES-GCM key and the lookup HMAC key are both derived from the secret's key with
// HKDF (different info strings), never used raw. The additional data binds a
// ciphertext to its place (the caller's context, e.g. "access:<owner>:<hub id>"),
// so a ciphertext copied into another row or field does not decrypt.
// "v1." ciphertexts (AES-GCM under the raw key, from before the second format)
// still open; the rotation step seals them again as "v2.".

export const TOKEN_KEYS_VARIABLE = 'HUBSPOT_TOKEN_KEYS';

const KEY_ID = /^[A-Za-z0-9_-]{1,32}$/;
const SEALED = /^(v[12])\.([A-Za-z0-9_-]{1,32})\.([A-Za-z0-9_-]{16})\.([A-Za-z0-9_-]{22,})$/;
const LOOKUP_INFO = new TextEncoder().encode('hubspot-token-lookup-v1');
const SEAL_INFO = new TextEncoder().encode('hubspot-token-seal-v2');

/** The sealed format this code writes. */
export const SEALED_FORMAT = 'v2';
export type SealedFormat = 'v1' | 'v2';

interface TokenKey {
  id: string;
  /** AES-GCM under the raw key: opens "v1." ciphertexts only. */
  legacyAes: Promise<CryptoKey>;
  /** AES-GCM under an HKDF-derived key: "v2.". */
  aes: Promise<CryptoKey>;
  lookup: Promise<CryptoKey>;
}

function derive(base: Promise<CryptoKey>, info: Uint8Array<ArrayBuffer>, algorithm: HmacImportParams | AesKeyGenParams, usages: KeyUsage[]): Promise<CryptoKey> {
  return base.then((k) => crypto.subtle.deriveKey({ name: 'HKDF', hash: 'SHA-256', salt: new Uint8Array(32), info }, k, algorithm, false, usages));
}

/** The keys from the secret; the first is current. Key material stays inside. */
export interface TokenKeyring {
  readonly currentKeyId: string;
  readonly keyIds: readonly string[];
  /** @internal */
  readonly keys: ReadonlyMap<string, TokenKey>;
  /** @internal */
  readonly variable: string;
}

/** Decrypting failed: unknown key, wrong key or altered data. The message names the key id, never the token. */
export class TokenDecryptionError extends Error {
  override name = 'TokenDecryptionError';
}

/** A token had to be encrypted or decrypted, but no keys are configured. */
export class TokenKeysMissing extends Error {
  override name = 'TokenKeysMissing';
  constructor(variable = TOKEN_KEYS_VARIABLE) {
    super(`${variable} is not set: HubSpot tokens cannot be encrypted or decrypted. Set it to "keyId:<base64 of 32 random bytes>".`);
  }
}

/**
 * Parses the keys secret. Null when unset or empty; throws (naming the variable
 * and the entry's position, never key material) when malformed.
 */
export function parseTokenKeys(value: string | undefined, variable = TOKEN_KEYS_VARIABLE): TokenKeyring | null {
  if (value === undefined || value.trim() === '') return null;
  const keys = new Map<string, TokenKey>();
  const entries = value.split(',').map((e) => e.trim());
  entries.forEach((entry, i) => {
    const colon = entry.indexOf(':');
    const id = colon > 0 ? entry.slice(0, colon) : '';
    if (!KEY_ID.test(id)) throw new Error(`${variable}: entry ${i + 1} needs "keyId:base64key" with a key id of 1-32 letters, digits, - or _.`);
    if (keys.has(id)) throw new Error(`${variable}: key id "${id}" is listed twice.`);
    let raw: Uint8Array;
    try {
      raw = fromBase64(entry.slice(colon + 1));
    } catch {
      throw new Error(`${variable}: key "${id}" is not valid base64.`);
    }
    if (raw.length !== 32) throw new Error(`${variable}: key "${id}" must be 32 bytes (it is ${raw.length}); make one with \`openssl rand -base64 32\`.`);
    const material = raw.slice().buffer as ArrayBuffer;
    const base = crypto.subtle.importKey('raw', material, 'HKDF', false, ['deriveKey']);
    keys.set(id, {
      id,
      legacyAes: crypto.subtle.importKey('raw', material, { name: 'AES-GCM' }, false, ['decrypt']),
      aes: derive(base, SEAL_INFO, { name: 'AES-GCM', length: 256 }, ['encrypt', 'decrypt']),
      lookup: derive(base, LOOKUP_INFO, { name: 'HMAC', hash: 'SHA-256', length: 256 }, ['sign']),
    });
  });
  const keyIds = [...keys.keys()];
  return { currentKeyId: keyIds[0]!, keyIds, keys, variable };
}

/** Throws TokenKeysMissing for a null keyring. */
export function requireTokenKeys(keys: TokenKeyring | null): TokenKeyring {
  if (!keys) throw new TokenKeysMissing();
  return keys;
}

/** Seals `token` under the current key, bound to `context`. */
export async function encryptToken(keys: TokenKeyring, token: string, context: string): Promise<string> {
  const key = keys.keys.get(keys.currentKeyId)!;
  const iv = crypto.getRandomValues(new Uint8Array(12));
  const sealed = await crypto.subtle.encrypt(
    { name: 'AES-GCM', iv, additionalData: new TextEncoder().encode(context) },
    await key.aes,
    new TextEncoder().encode(token),
  );
  return `${SEALED_FORMAT}.${key.id}.${toBase64Url(iv)}.${toBase64Url(new Uint8Array(sealed))}`;
}

/** The key id a sealed token names, or null when it is not in the sealed form. */
export function sealedKeyId(sealed: string): string | null {
  return SEALED.exec(sealed)?.[2] ?? null;
}

/** The format of a sealed token ("v1" or "v2"), or null when it is not in the sealed form. */
export function sealedFormat(sealed: string): SealedFormat | null {
  return (SEALED.exec(sealed)?.[1] as SealedFormat | undefined) ?? null;
}

/**
 * Opens a sealed token. `context`: the additional data it was sealed with, or a
 * function giving it per format (the formats may bind to different places).
 * Throws TokenDecryptionError (never containing the token) when it cannot.
 */
export async function decryptToken(keys: TokenKeyring, sealed: string, context: string | ((format: SealedFormat) => string)): Promise<string> {
  const m = SEALED.exec(sealed);
  if (!m) throw new TokenDecryptionError('The stored HubSpot token is not in the encrypted form (v2.<keyId>.<iv>.<data>).');
  const [, format, keyId, iv, data] = m;
  const key = keys.keys.get(keyId!);
  if (!key) {
    throw new TokenDecryptionError(
      `The stored HubSpot token was encrypted with key "${keyId}", which is not in ${keys.variable} (it has ${keys.keyIds.map((k) => `"${k}"`).join(', ')}). ` +
        'Add that key back (as a non-first entry) or reconnect the portal.',
    );
  }
  try {
    const plain = await crypto.subtle.decrypt(
      { name: 'AES-GCM', iv: fromBase64Url(iv!), additionalData: new TextEncoder().encode(typeof context === 'string' ? context : context(format as SealedFormat)) },
      await (format === 'v1' ? key.legacyAes : key.aes),
      fromBase64Url(data!),
    );
    return new TextDecoder().decode(plain);
  } catch {
    throw new TokenDecryptionError(
      `The stored HubSpot token did not decrypt with key "${keyId}" from ${keys.variable}: that key is not the one it was sealed with, or the data was altered.`,
    );
  }
}

/**
 * Lookup hashes of a token ("is this the token we already store?") without
 * storing it: HMAC-SHA256 under a key derived (HKDF) from each configured key,
 * the current key's first. A row stores the hash under its own key id; the
 * rotation step recomputes it with the new key.
 */
export async function tokenLookupHashes(keys: TokenKeyring, token: string): Promise<string[]> {
  return Promise.all(keys.keyIds.map((id) => lookupHash(keys.keys.get(id)!, token)));
}

/** The lookup hash under the current key. */
export async function tokenLookupHash(keys: TokenKeyring, token: string): Promise<string> {
  return lookupHash(keys.keys.get(keys.currentKeyId)!, token);
}

async function lookupHash(key: TokenKey, token: string): Promise<string> {
  const mac = new Uint8Array(await crypto.subtle.sign('HMAC', await key.lookup, new TextEncoder().encode(token)));
  return `${key.id}.${toBase64Url(mac)}`;
}

/** Bytes as unpadded base64url (RFC 4648 §5). */
export function toBase64Url(bytes: Uint8Array | ArrayBuffer): string {
  if (bytes instanceof ArrayBuffer) bytes = new Uint8Array(bytes);
  let s = '';
  for (const b of bytes) s += String.fromCharCode(b);
  return btoa(s).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

function fromBase64Url(text: string): Uint8Array<ArrayBuffer> {
  return fromBase64(text.replace(/-/g, '+').replace(/_/g, '/'));
}

function fromBase64(text: string): Uint8Array<ArrayBuffer> {
  const clean = text.trim();
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(clean)) throw new Error('not base64');
  const bin = atob(clean.padEnd(clean.length + ((4 - (clean.length % 4)) % 4), '='));
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}
