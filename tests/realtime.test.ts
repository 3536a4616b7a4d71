// The Realtime stand-in (local/realtime/) through the local gateway, driven by
// supabase-js's own realtime client (the `ws` package as its transport: Node 20
// has no WebSocket): a channel joins with postgres_changes bindings, receives
// inserts and updates of its user's own runs and jobs, typed as hosted types
// them, and never another user's, whatever it subscribes to; bad tokens are
// refused with the real server's errors; removing the channel ends delivery.
// Each "nothing arrived" check is closed by a later change the subscriber may
// see: the feed delivers in commit order, so when it arrives, the earlier
// change had been decided.
import { createClient, type RealtimeChannel, type SupabaseClient } from '@supabase/supabase-js';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { createSigningKeys, startLocalFunctions, type LocalFunctions, type SigningKeys } from '../local/supabase.ts';
import { useTestDatabase } from './support/database.ts';
import { seedRun } from './support/queue-fixtures.ts';

type Change = { eventType: string; schema: string; table: string; commit_timestamp: string; errors: unknown; new: Record<string, any>; old: Record<string, any> };

async function until<T>(what: string, probe: () => T | undefined | null | false, ms = 15_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = probe();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(25);
  }
}

describe('Realtime stand-in', () => {
  const db = useTestDatabase();
  let keys: SigningKeys;
  let fns: LocalFunctions;
  const clients: SupabaseClient[] = [];
  let a: Awaited<ReturnType<typeof seedRun>>;
  let b: Awaited<ReturnType<typeof seedRun>>;
  let jobA: number;
  let jobB: number;

  const client = (token: string) => {
    const c = createClient(fns.url, keys.anonKey, { realtime: { transport: WebSocket as any, heartbeatIntervalMs: 5000 } });
    void c.realtime.setAuth(token);
    clients.push(c);
    return c;
  };
  /** Subscribes and resolves with the status and error the subscribe callback reports first. */
  const subscribed = (ch: RealtimeChannel) =>
    new Promise<{ status: string; err?: Error }>((resolve) => ch.subscribe((status, err) => resolve({ status, err })));

  beforeAll(async () => {
    keys = await createSigningKeys();
    fns = await startLocalFunctions({ names: [], env: {}, jwks: keys.jwks, realtime: { dbUrl: db.directUrl } });
    a = await seedRun(db.sql, { types: ['site_pages', 'blog_posts'] });
    b = await seedRun(db.sql, { types: ['site_pages'] });
    [{ id: jobA }] = (await db.sql`select id::int from public.jobs where run_id = ${a.runId} order by id limit 1`) as any;
    [{ id: jobB }] = (await db.sql`select id::int from public.jobs where run_id = ${b.runId}`) as any;
  });

  afterAll(async () => {
    for (const c of clients) await c.removeAllChannels().catch(() => {});
    await fns?.stop();
  });

  it('delivers a user their own rows, typed, and never another user’s', async () => {
    const tokenA = await keys.signUserToken(a.userId);
    const tokenB = await keys.signUserToken(b.userId);
    const seenA: Change[] = [];
    const seenB: Change[] = [];
    const system: any[] = [];
    const chA = client(tokenA)
      .channel(`run-${a.runId}`)
      .on('postgres_changes', { event: '*', schema: 'public', table: 'jobs', filter: `run_id=eq.${a.runId}` }, (p) => seenA.push(p as Change))
      .on('postgres_changes', { event: 'UPDATE', schema: 'public', table: 'runs', filter: `id=eq.${a.runId}` }, (p) => seenA.push(p as Change))
      .on('system', {}, (p) => system.push(p));
    // B asks for A's run, and for every job: RLS must keep A's rows from B.
    const chB = client(tokenB)
      .channel('snoop')
      .on('postgres_changes', { event: '*', schema: 'public', table: 'jobs', filter: `run_id=eq.${a.runId}` }, (p) => seenB.push(p as Change))
      .on('postgres_changes', { event: '*', schema: 'public', table: 'jobs' }, (p) => seenB.push(p as Change))
      .on('postgres_changes', { event: '*', schema: 'public', table: 'runs' }, (p) => seenB.push(p as Change))
      .on('system', {}, (p) => system.push(p));
    expect(await subscribed(chA)).toEqual({ status: 'SUBSCRIBED', err: undefined });
    expect(await subscribed(chB)).toEqual({ status: 'SUBSCRIBED', err: undefined });
    // Changes reach a channel from its "Subscribed to PostgreSQL" on.
    await until('both subscriptions live', () => system.filter((s) => s.message === 'Subscribed to PostgreSQL').length === 2);
    expect(system.map((s) => s.channel).sort()).toEqual([`run-${a.runId}`, 'snoop']);
    expect(system.every((s) => s.extension === 'postgres_changes' && s.status === 'ok')).toBe(true);

    await db.sql`update public.jobs set progress_done = 7, progress_total = 40 where id = ${jobA}`;
    await db.sql`update public.runs set status = 'running', started_at = now() where id = ${a.runId}`;
    await db.sql`update public.jobs set progress_done = 3 where id = ${jobB}`;
    const [{ id: insertedA }] = (await db.sql`
      insert into public.jobs (run_id, portal_id, owner_id, kind, content_type)
      values (${a.runId}, ${a.portalId}, ${a.userId}, 'fetch', 'blog_tags') returning id::int`) as any;

    const upd = await until('A’s job update', () => seenA.find((c) => c.table === 'jobs' && c.eventType === 'UPDATE'));
    expect(upd).toMatchObject({ schema: 'public', errors: null, old: { id: jobA } });
    expect(upd.new).toMatchObject({ id: jobA, run_id: a.runId, progress_done: 7, progress_total: 40, status: 'pending', owner_id: a.userId });
    expect(typeof upd.new.checkpoint === 'object').toBe(true); // jsonb null stays null, numbers are numbers
    expect(upd.commit_timestamp).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    const run = await until('A’s run update', () => seenA.find((c) => c.table === 'runs'));
    expect(run.new).toMatchObject({ id: a.runId, status: 'running', jobs_total: 2 });
    expect([...run.new.content_types].sort()).toEqual(['blog_posts', 'site_pages']);
    const ins = await until('A’s job insert', () => seenA.find((c) => c.eventType === 'INSERT'));
    expect(ins).toMatchObject({ table: 'jobs', old: {}, new: { id: insertedA, content_type: 'blog_tags', run_id: a.runId } });

    // B's own job change arrives to B's unfiltered binding, after A's changes were decided.
    const own = await until('B’s own job update', () => seenB.find((c) => c.new.id === jobB));
    expect(own.new.progress_done).toBe(3);
    expect(seenB.every((c) => c.new.owner_id === b.userId)).toBe(true);
    expect(seenB).toHaveLength(1);
    // And nothing of B's reached A.
    expect(seenA.filter((c) => c.new.owner_id !== a.userId)).toEqual([]);
    expect(seenA).toHaveLength(3);
  });

  it('a channel subscribed in the very next statement after createClient(url, key, { accessToken }) joins as anon, as on hosted, and gets the user’s rows once the token reaches it', async () => {
    let token = await keys.signUserToken(a.userId);
    const c = createClient(fns.url, keys.anonKey, { accessToken: async () => token, realtime: { transport: WebSocket as any, heartbeatIntervalMs: 5000 } });
    clients.push(c);
    const all: Change[] = [];
    const filtered: Change[] = [];
    const sysAll: any[] = [];
    const sysFiltered: any[] = [];
    // realtime-js builds the join before supabase-js has handed it the token, so both join with the anon key.
    c.channel('next-statement').on('postgres_changes', { event: 'UPDATE', schema: 'public', table: 'jobs' }, (p) => all.push(p as Change)).on('system', {}, (p) => sysAll.push(p)).subscribe();
    c.channel('next-statement-filtered')
      .on('postgres_changes', { event: 'UPDATE', schema: 'public', table: 'jobs', filter: `id=eq.${jobA}` }, (p) => filtered.push(p as Change))
      .on('system', {}, (p) => sysFiltered.push(p))
      .subscribe();
    // As anon: the unfiltered binding is subscribed but every change is refused; the filter is refused outright.
    await until('the anon subscriptions', () => sysAll.length && sysFiltered.length);
    expect(sysAll[0]).toMatchObject({ status: 'ok', message: 'Subscribed to PostgreSQL' });
    expect(sysFiltered[0]).toMatchObject({ status: 'error' });
    expect(sysFiltered[0].message).toMatch(/invalid column for filter id$/);
    await db.sql`update public.jobs set progress_done = 21 where id = ${jobA}`;
    expect(await until('the refused change', () => all[0])).toMatchObject({ errors: ['Error 401: Unauthorized'], new: {} });

    // The user's token reaches the joined channels as an `access_token` message (realtime-js sends it when the
    // token it gets changes: at a heartbeat after a refresh, or on setAuth()); both bindings are subscribed again.
    token = await keys.signUserToken(a.userId, { extraClaims: { session_id: crypto.randomUUID() } });
    await c.realtime.setAuth();
    await until('both resubscribed', () => sysAll.length === 2 && sysFiltered.length === 2);
    expect([sysAll[1], sysFiltered[1]].map((m) => [m.status, m.message])).toEqual([['ok', 'Subscribed to PostgreSQL'], ['ok', 'Subscribed to PostgreSQL']]);
    await db.sql`update public.jobs set progress_done = 22 where id = ${jobA}`;
    const row = await until('the user’s row, unfiltered', () => all.find((x) => x.new.progress_done === 22));
    expect(row).toMatchObject({ errors: null, new: { id: jobA, owner_id: a.userId } });
    expect(await until('the user’s row, filtered', () => filtered[0])).toMatchObject({ errors: null, new: { id: jobA, progress_done: 22 } });
    expect(filtered).toHaveLength(1);
    await c.removeAllChannels();
  });

  it('the order that always works: the token set (awaited) before subscribing, so the join carries it', async () => {
    const token = await keys.signUserToken(a.userId);
    const c = createClient(fns.url, keys.anonKey, { accessToken: async () => token, realtime: { transport: WebSocket as any } });
    clients.push(c);
    await c.realtime.setAuth();
    const seen: Change[] = [];
    const system: any[] = [];
    c.channel('token-first')
      .on('postgres_changes', { event: 'UPDATE', schema: 'public', table: 'jobs', filter: `id=eq.${jobA}` }, (p) => seen.push(p as Change))
      .on('system', {}, (p) => system.push(p))
      .subscribe();
    expect(await until('live', () => system[0])).toMatchObject({ status: 'ok', message: 'Subscribed to PostgreSQL' });
    await db.sql`update public.jobs set progress_done = 23 where id = ${jobA}`;
    expect(await until('the row', () => seen[0])).toMatchObject({ errors: null, new: { id: jobA, progress_done: 23 } });
    await c.removeAllChannels();
  });

  it('refuses a bad access token at join with the real server’s errors', async () => {
    const expired = await keys.signUserToken(a.userId, { expiresInSeconds: -30 });
    const other = await generateKeyPair('ES256');
    const foreign = await new SignJWT({ role: 'authenticated' })
      .setProtectedHeader({ alg: 'ES256', kid: 'not-this-project', typ: 'JWT' })
      .setSubject(a.userId)
      .setExpirationTime('1h')
      .sign(other.privateKey);
    void exportJWK;
    const noExp = await keys.signUserToken(a.userId).then(() =>
      new SignJWT({ role: 'authenticated' }).setProtectedHeader({ alg: 'ES256', kid: keys.jwks.keys[0]!.kid!, typ: 'JWT' }).sign(other.privateKey),
    );
    const cases: [string, RegExp][] = [
      [expired, /^InvalidJWTToken: Token has expired 3\d seconds ago$/],
      ['not-a-jwt', /^MalformedJWT: The token provided is not a valid JWT$/],
      [foreign, /^JwtSignerError: Failed to generate JWT signer for key ID \(kid\) "not-this-project"/],
      [noExp, /^JwtSignatureError: Failed to validate JWT signature$/],
    ];
    for (const [token, message] of cases) {
      const c = client(token);
      const ch = c.channel(`bad-${Math.random()}`).on('postgres_changes', { event: '*', schema: 'public', table: 'jobs' }, () => {});
      const { status, err } = await subscribed(ch);
      expect(status).toBe('CHANNEL_ERROR');
      expect(err?.message).toMatch(message);
      // The guide's advice: remove the channel, or realtime-js rejoins it forever.
      await c.removeChannel(ch);
      expect(c.getChannels()).toEqual([]);
    }
    await until('the refused channels are gone', () => fns.realtime!.stats().channels === 0 || fns.realtime!.stats().channels <= 2);
  });

  it('refuses a socket whose API key is not the project’s', async () => {
    const wsUrl = `${fns.url.replace('http', 'ws')}/realtime/v1/websocket?vsn=2.0.0&apikey=`;
    const status = (url: string) =>
      new Promise<{ code: number; body: string }>((resolve) => {
        const ws = new WebSocket(url);
        ws.on('unexpected-response', (_req, res) => {
          let body = '';
          res.on('data', (d) => (body += d));
          res.on('end', () => resolve({ code: res.statusCode ?? 0, body }));
        });
        ws.on('open', () => {
          ws.close();
          resolve({ code: 101, body: '' });
        });
        ws.on('error', () => {});
      });
    expect(await status(`${wsUrl}${keys.anonKey}`)).toEqual({ code: 101, body: '' });
    expect(await status(`${wsUrl}any-string`)).toEqual({ code: 401, body: JSON.stringify({ error: 'The token provided is not a valid JWT' }) });
    expect(await status(wsUrl.replace('&apikey=', ''))).toEqual({ code: 401, body: JSON.stringify({ error: 'API key is missing' }) });
  });

  it('speaks both serializers on the wire: heartbeat, join reply with binding ids, system message, leave', async () => {
    const token = await keys.signUserToken(a.userId);
    for (const vsn of ['2.0.0', '1.0.0'] as const) {
      const ws = new WebSocket(`${fns.url.replace('http', 'ws')}/realtime/v1/websocket?apikey=${keys.anonKey}&vsn=${vsn}`);
      const frames: any[] = [];
      ws.on('message', (d) => {
        const v = JSON.parse(d.toString());
        frames.push(vsn === '2.0.0' ? { join_ref: v[0], ref: v[1], topic: v[2], event: v[3], payload: v[4] } : v);
      });
      await new Promise((r) => ws.once('open', r));
      const push = (join_ref: string | null, ref: string, topic: string, event: string, payload: unknown) =>
        ws.send(JSON.stringify(vsn === '2.0.0' ? [join_ref, ref, topic, event, payload] : { join_ref, ref, topic, event, payload }));
      push(null, '1', 'phoenix', 'heartbeat', {});
      const binding = { event: 'UPDATE', schema: 'public', table: 'jobs', filter: `id=eq.${jobA}` };
      push('2', '2', 'realtime:wire', 'phx_join', { config: { postgres_changes: [binding] }, access_token: token });
      await until('the join reply and system message', () => frames.find((f) => f.event === 'system'));
      expect(frames[0]).toEqual({ join_ref: null, ref: '1', topic: 'phoenix', event: 'phx_reply', payload: { status: 'ok', response: {} } });
      const joined = frames.find((f) => f.ref === '2')!;
      expect(joined).toMatchObject({ join_ref: '2', topic: 'realtime:wire', event: 'phx_reply', payload: { status: 'ok' } });
      const [{ id, ...echo }] = joined.payload.response.postgres_changes;
      expect(echo).toEqual(binding);
      expect(Number.isInteger(id)).toBe(true);
      expect(frames.find((f) => f.event === 'system')).toEqual({
        join_ref: '2', ref: null, topic: 'realtime:wire', event: 'system',
        payload: { extension: 'postgres_changes', status: 'ok', message: 'Subscribed to PostgreSQL', channel: 'wire' },
      });
      await db.sql`update public.jobs set attempts = attempts where id = ${jobA}`;
      const change = await until('the change', () => frames.find((f) => f.event === 'postgres_changes'));
      expect(change).toMatchObject({ join_ref: null, ref: null, topic: 'realtime:wire', payload: { ids: [id], data: { type: 'UPDATE', table: 'jobs', errors: null, old_record: { id: jobA } } } });
      expect(change.payload.data.columns).toContainEqual({ name: 'progress_done', type: 'int4' });
      push('2', '3', 'realtime:wire', 'phx_leave', {});
      await until('the leave', () => frames.find((f) => f.event === 'phx_close'));
      expect(frames.find((f) => f.ref === '3')).toMatchObject({ event: 'phx_reply', payload: { status: 'ok', response: {} } });
      push('2', '4', 'realtime:wire', 'access_token', { access_token: token });
      await until('the unmatched-topic reply', () => frames.find((f) => f.ref === '4'));
      expect(frames.find((f) => f.ref === '4').payload).toEqual({ status: 'error', response: { reason: 'unmatched topic' } });
      ws.close();
    }
  });

  it('reports a binding it cannot serve, and a refreshed token that is bad ends the channel', async () => {
    const c = client(await keys.signUserToken(a.userId));
    const system: any[] = [];
    const ch = c
      .channel('bad-binding')
      .on('postgres_changes', { event: '*', schema: 'public', table: 'jobs', filter: 'no_such_column=eq.1' }, () => {})
      .on('system', {}, (p) => system.push(p));
    expect((await subscribed(ch)).status).toBe('SUBSCRIBED');
    const s = await until('the system error', () => system[0]);
    expect(s).toMatchObject({ extension: 'postgres_changes', status: 'error', channel: 'bad-binding' });
    expect(s.message).toMatch(/^Unable to subscribe to changes with given parameters\. An exception happened .*invalid column for filter no_such_column$/);
    await c.removeChannel(ch);

    const notPublished: any[] = [];
    const ch2 = c.channel('not-published').on('postgres_changes', { event: '*', schema: 'public', table: 'portals' }, () => {}).on('system', {}, (p) => notPublished.push(p));
    await subscribed(ch2);
    expect((await until('the system error', () => notPublished[0])).message).toMatch(/^Unable to subscribe to changes with given parameters\. Please check Realtime is enabled/);
    await c.removeChannel(ch2);

    const closed: string[] = [];
    const ch3 = c.channel('refresh').on('postgres_changes', { event: '*', schema: 'public', table: 'jobs' }, () => {}).on('system', {}, (p) => closed.push(p.message));
    await new Promise<void>((resolve) => ch3.subscribe((st) => (st === 'SUBSCRIBED' ? resolve() : closed.push(st))));
    await c.realtime.setAuth(await keys.signUserToken(a.userId, { expiresInSeconds: -5 }));
    await until('the channel to close', () => closed.includes('CLOSED'));
    // The binding's own 'Subscribed to PostgreSQL' may arrive after SUBSCRIBED, before the refresh: skip it.
    expect(closed.filter((m) => m !== 'Subscribed to PostgreSQL')[0]).toMatch(/^Token has expired \d+ seconds ago$/);
  });

  it('stops delivering once the channel is removed', async () => {
    const token = await keys.signUserToken(a.userId);
    const c = client(token);
    const seen: Change[] = [];
    const ch = c.channel('removed').on('postgres_changes', { event: 'UPDATE', schema: 'public', table: 'jobs', filter: `id=eq.${jobA}` }, (p) => seen.push(p as Change));
    const system: any[] = [];
    ch.on('system', {}, (p) => system.push(p));
    expect((await subscribed(ch)).status).toBe('SUBSCRIBED');
    await until('live', () => system.length);
    await db.sql`update public.jobs set progress_done = 11 where id = ${jobA}`;
    await until('the update', () => seen.length === 1);
    expect(await c.removeChannel(ch)).toBe('ok');
    // A second client of A's stays subscribed: it sees the next update, the removed channel does not.
    const other: Change[] = [];
    const c2 = client(token);
    const ch2 = c2.channel('still-here').on('postgres_changes', { event: 'UPDATE', schema: 'public', table: 'jobs', filter: `id=eq.${jobA}` }, (p) => other.push(p as Change));
    const sys2: any[] = [];
    ch2.on('system', {}, (p) => sys2.push(p));
    await subscribed(ch2);
    await until('live', () => sys2.length);
    await db.sql`update public.jobs set progress_done = 12 where id = ${jobA}`;
    await until('the other client’s update', () => other.length === 1);
    expect(seen.map((c) => c.new.progress_done)).toEqual([11]);
  });

  it('delivers a burst of changes with a few queries in all, not some per change: each subscriber gets all of its own, in commit order', async () => {
    // A fetch saves a page of every running job several times a second: each save is a change of the job row.
    // Checked one at a time (filters, RLS, records: some 7 round trips each), such a stream fell seconds behind.
    const more = await seedRun(db.sql, { types: ['site_pages', 'blog_posts', 'blog_tags', 'blog_authors', 'landing_pages'] });
    const ids = (await db.sql`select id::int from public.jobs where run_id = ${more.runId} order by id`).map((r) => r.id as number);
    // One token per user: claims signed a second apart would be two RLS groups (a query each), not one.
    const tokens = new Map<string, string>();
    const subscribe = async (userId: string, filter: string | null) => {
      if (!tokens.has(userId)) tokens.set(userId, await keys.signUserToken(userId));
      const c = client(tokens.get(userId)!);
      const seen: Change[] = [];
      const system: any[] = [];
      c.channel(`burst-${userId}-${filter ?? 'all'}`)
        .on('postgres_changes', { event: 'UPDATE', schema: 'public', table: 'jobs', ...(filter ? { filter } : {}) }, (p) => seen.push(p as Change))
        .on('system', {}, (p) => system.push(p))
        .subscribe();
      await until('live', () => system.length);
      return seen;
    };
    const mine = await subscribe(more.userId, `run_id=eq.${more.runId}`);
    const all = await subscribe(more.userId, null);
    const others = await subscribe(b.userId, null);
    // Everything before (the run's own inserts) delivered: a change of it has arrived, after them.
    await db.sql`update public.jobs set progress_done = 0 where id = ${ids[0]!}`;
    await until('the sentinel', () => mine.length === 1 && all.length === 1);
    // The queries one poll of 5 changes takes, with every subscription this file has left open.
    mine.length = 0;
    all.length = 0;
    const small = fns.realtime!.stats();
    await db.sql`update public.jobs set progress_done = 0 where id = any(${ids})`;
    await until('the small burst', () => mine.length === 5 && all.length === 5);
    const perPoll = fns.realtime!.stats().deliveryQueries - small.deliveryQueries;
    mine.length = 0;
    all.length = 0;
    const before = fns.realtime!.stats();
    // 200 changes committed together (one transaction: one poll of the slot decodes all of them).
    await db.sql.begin(async (tx) => {
      for (let n = 1; n <= 40; n++) await tx`update public.jobs set progress_done = ${n} where id = any(${ids})`;
    });
    await until('every change', () => mine.length === 200 && all.length === 200);
    const after = fns.realtime!.stats();
    expect(after.changes - before.changes).toBe(200);
    // One filter query, one RLS query per table, role and claims, one records query per table, the column lookups:
    // as many for 200 changes as for 5, and a few (one per subscriber's claims, not per change).
    expect(after.deliveryQueries - before.deliveryQueries).toBe(perPoll);
    expect(perPoll).toBeLessThanOrEqual(8);
    expect(mine.map((c) => c.new.progress_done)).toEqual(Array.from({ length: 40 }, (_, i) => Array(5).fill(i + 1)).flat());
    expect(mine.every((c) => c.new.run_id === more.runId && c.errors === null)).toBe(true);
    // A change B may see arrives after them all: none of the 200 reached B.
    await db.sql`update public.jobs set progress_done = 99 where id = ${jobB}`;
    await until('B’s own change', () => others.some((c) => c.new.id === jobB && c.new.progress_done === 99));
    expect(others.every((c) => c.new.owner_id === b.userId)).toBe(true);
  });
});
