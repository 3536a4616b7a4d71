// Token-key rotation as one of the worker's maintenance steps: at the start
// of every invocation, one bounded batch of credentials still sealed under an
// older key (or legacy plaintext) is re-sealed under the current key
// (shared/token-rotation.ts), so a key change completes without downtime.
import type { TokenKeyring } from '../../shared/token-crypto.ts';
import { rotateCredentialsBatch } from '../../shared/token-rotation.ts';
import type { WorkerRuntime } from './runtime.ts';

/**
 * One bounded batch of the key rotation (credentials under an older key, or
 * legacy plaintext, sealed under the current key). A failure is logged, never
 * fatal: the next invocation tries again.
 */
export async function rotateSealedTokens(rt: WorkerRuntime, keys: TokenKeyring): Promise<void> {
  try {
    const batch = await rotateCredentialsBatch(rt.sql, keys);
    if (batch.seen > 0) rt.log.info('token_rotation_batch', { ...batch, unreadablePortals: batch.unreadablePortals.slice(0, 20), key_id: keys.currentKeyId });
  } catch (e) {
    rt.log.warn('token_rotation_error', { error: e instanceof Error ? e.message : String(e) });
  }
}
