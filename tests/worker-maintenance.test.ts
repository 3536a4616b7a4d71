// The maintenance at a worker invocation's start (functions/worker/maintenance.ts):
// which gated tasks are due (pure), and the key rotation against Postgres: a
// batch per invocation while rows are left, then none until the keys change
// (or KEY_ROTATION_RECHECK_MS passed). The cron heal's own test is
// tests/cron-jobs.test.ts; the rotation's, tests/oauth-tokens.test.ts.
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { runWorkerInvocation } from '../functions/worker/invocation.ts';
import { CRON_HEAL_EVERY_MS, dueAtStart, KEY_ROTATION_RECHECK_MS, type MaintenanceMemory } from '../functions/worker/maintenance.ts';
import { connectPrivateAppPortal } from '../shared/hubspot/portal-connect.ts';
import { parseTokenKeys, type TokenKeyring } from '../shared/token-crypto.ts';
import { createUser, useTestDatabase } from './support/database.ts';
import { testWorkerRuntime } from './support/worker-runtime.ts';

const db = useTestDatabase();

const newKey = (id: string) => `${id}:${randomBytes(32).toString('base64')}`;
const K1 = newKey('k1');
const K2 = newKey('k2');
const keys = (value: string) => parseTokenKeys(value)!;

describe('what is due at an invocation\'s start', () => {
  const ring = keys(K1);
  const fresh: MaintenanceMemory = { cronHealAskedAt: -Infinity, rotationDone: null };

  it('at an isolate\'s first start: the cron heal and the key rotation (with keys)', () => {
    expect(dueAtStart(fresh, ring, 1_000)).toEqual({ cronHeal: true, keyRotation: true });
    expect(dueAtStart(fresh, null, 1_000)).toEqual({ cronHeal: true, keyRotation: false });
  });

  it('the cron heal at most every CRON_HEAL_EVERY_MS', () => {
    const m = { ...fresh, cronHealAskedAt: 10_000 };
    expect(dueAtStart(m, null, 10_000 + CRON_HEAL_EVERY_MS - 1).cronHeal).toBe(false);
    expect(dueAtStart(m, null, 10_000 + CRON_HEAL_EVERY_MS).cronHeal).toBe(true);
  });

  it('after a rotation batch found nothing: again only after KEY_ROTATION_RECHECK_MS, or at once with other keys', () => {
    const m = { ...fresh, rotationDone: { keys: ring, at: 10_000 } };
    expect(dueAtStart(m, ring, 10_000 + KEY_ROTATION_RECHECK_MS - 1).keyRotation).toBe(false);
    expect(dueAtStart(m, ring, 10_000 + KEY_ROTATION_RECHECK_MS).keyRotation).toBe(true);
    expect(dueAtStart(m, keys(K1), 10_001).keyRotation).toBe(true); // a new keyring: the isolate's keys changed
  });
});

describe('key rotation at invocation starts', () => {
  const keyOf = async (portalId: string) =>
    (await db.sql`select key_id from private.portal_credentials where portal_id = ${portalId}`)[0]!.key_id as string;
  const invoke = async (ring: TokenKeyring) =>
    runWorkerInvocation({ ...(await testWorkerRuntime(db.sql, 'http://127.0.0.1:9', { lanes: 1 })), tokenKeys: ring }, 'maintainer');
  const connect = async (ring: TokenKeyring, hubspotPortalId: number) =>
    connectPrivateAppPortal(db.sql, ring, { ownerId: await createUser(db.sql), hubspotPortalId, name: null, accessToken: `pat-na1-${randomBytes(8).toString('hex')}` });

  it('re-seals a batch per invocation while rows are left, then reads no more until the keys change', async () => {
    const old = keys(K1);
    const first = await connect(old, 990_001);
    const isolate = keys(`${K2},${K1}`); // an isolate after the switch (step 2 of the key rotation)
    await invoke(isolate);
    expect(await keyOf(first)).toBe('k2');
    await invoke(isolate); // nothing left: the isolate stops asking

    // An isolate still on the previous keys seals a new connection under k1 meanwhile.
    const late = await connect(old, 990_002);
    await invoke(isolate);
    expect(await keyOf(late)).toBe('k1'); // not asked again within KEY_ROTATION_RECHECK_MS
    await invoke(keys(`${K2},${K1}`)); // a new isolate (its own keyring) asks at its first start
    expect(await keyOf(late)).toBe('k2');
  });
});
