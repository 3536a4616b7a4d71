import { createClient } from '@supabase/supabase-js';
import { setTimeout as sleep } from 'node:timers/promises';
import { it } from 'vitest';
import WebSocket from 'ws';
import { createSigningKeys, startLocalFunctions } from '../scripts/lib/local-supabase.ts';
import { useTestDatabase } from './support/database.ts';
import { seedRun } from './support/queue-fixtures.ts';

const db = useTestDatabase();
it('exp', async () => {
  const keys = await createSigningKeys();
  const fns = await startLocalFunctions({ names: [], env: {}, jwks: keys.jwks, realtime: { dbUrl: db.directUrl }, onLine: (_f, l) => console.log('RT', l) });
  const a = await seedRun(db.sql, { types: ['site_pages'] });
  const token = await keys.signUserToken(a.userId);
  const OrigWS = WebSocket as any;
  class LogWS extends OrigWS { send(d: any) { console.log('C>', String(d).slice(0, 300)); super.send(d); } constructor(...args: any[]) { super(...args); this.on('message', (m: any) => console.log('S>', String(m).slice(0, 300))); } }
  for (const filter of [undefined, `run_id=eq.${a.runId}`]) {
    const c = createClient(fns.url, keys.anonKey, { accessToken: async () => token, realtime: { transport: LogWS as any } });
    const seen: any[] = [];
    c.channel('x' + Math.random()).on('postgres_changes', { event: '*', schema: 'public', table: 'jobs', ...(filter ? { filter } : {}) }, (p) => seen.push(p)).subscribe((s, e) => console.log('status', s, e?.message));
    await sleep(1500);
    await db.sql`update public.jobs set progress_done = progress_done + 1 where run_id = ${a.runId}`;
    await sleep(1500);
    console.log('SEEN', filter, JSON.stringify(seen).slice(0, 400));
    await c.removeAllChannels();
  }
  await fns.stop();
});
