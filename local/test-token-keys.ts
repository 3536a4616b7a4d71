// The token keys of tests and local tools (chaos, benchmarks, the local
// system): one fixed key, derived from a constant, so that every process of a
// run (the test itself, chaos worker processes, both functions under Deno)
// opens what another one sealed. It is NOT a secret: it is in the source.
// Never give it to a deployment (HUBSPOT_TOKEN_KEYS there comes from
// `openssl rand -base64 32`).
import { createHash } from 'node:crypto';
import { parseTokenKeys, type TokenKeyring } from '../shared/token-crypto.ts';

/** HUBSPOT_TOKEN_KEYS for tests and local tools: key id "test1", key = SHA-256 of a fixed sentence. */
export const TEST_TOKEN_KEYS = `test1:${createHash('sha256').update('pg-edge-queue test token key, not a secret').digest('base64')}`;

/** TEST_TOKEN_KEYS, parsed: what tests seal fixtures with and give in-process workers and orchestrators. */
export const testTokenKeys: TokenKeyring = parseTokenKeys(TEST_TOKEN_KEYS)!;
