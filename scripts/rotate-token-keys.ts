// Re-seals every stored HubSpot credential under the current token key (the
// first of HUBSPOT_TOKEN_KEYS), legacy plaintext rows included, in bounded
// batches. The worker does the same one batch per invocation; this runs them
// all now, e.g. before removing an old key.
//
//   SUPABASE_DB_URL=postgres://… HUBSPOT_TOKEN_KEYS="new:…,old:…" npx tsx scripts/rotate-token-keys.ts [--batch 50]
import { parseArgs } from 'node:util';
import { connectDatabase } from '../shared/db.ts';
import { parseTokenKeys } from '../shared/token-crypto.ts';
import { rotateAllCredentials } from '../shared/hubspot/token-rotation.ts';

const { values } = parseArgs({ options: { batch: { type: 'string', default: '50' } } });
const url = process.env['QUEUE_DB_URL'] || process.env['SUPABASE_DB_URL'];
const keys = parseTokenKeys(process.env['HUBSPOT_TOKEN_KEYS']);
const batch = Number(values.batch);
if (!url || !keys || !Number.isInteger(batch) || batch < 1 || batch > 500) {
  console.error('Set SUPABASE_DB_URL (or QUEUE_DB_URL) and HUBSPOT_TOKEN_KEYS; --batch is 1-500.');
  process.exit(2);
}
const sql = connectDatabase(url, { max: 1, applicationName: 'rotate-token-keys' });
try {
  const result = await rotateAllCredentials(sql, keys, batch);
  const [left] = await sql`select count(*)::int as n from private.portal_credentials
                            where key_id is distinct from ${keys.currentKeyId} or access_token is not null`;
  console.log(JSON.stringify({ currentKeyId: keys.currentKeyId, rotated: result.rotated, unreadable: result.unreadablePortals, left: left!.n }));
  process.exitCode = left!.n === 0 ? 0 : 1;
} finally {
  await sql.end({ timeout: 5 });
}
