// Sync schedules: written by the portal's owner under RLS, run by
// public.schedule_due_syncs (the pg_cron tick) through create_run's dedup
// (here with no probe grace: every due incremental a run).
// Due runs, dedup against active runs, pause, disconnect, and many ticks racing
// on real connections. A portal not the writer's is "not found" as a missing one
// is; a user's writes through PostgREST (its request settings set as it sets
// them) take the per-user write limit. docs/sync.md.
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { connectDatabase, asUser, type Sql, type TransactionSql } from '../shared/db.ts';
import { createRun } from '../shared/sql/runs.ts';
import { createUserWithPortal, useTestDatabase } from './support/database.ts';
import { drainQueue, pgError } from './support/queue-fixtures.ts';

const db = useTestDatabase();

// These are the tick's tests: with no grace it makes every due incremental a run, as it does
// for schedules no lane probed (lanes' schedule probes: tests/schedule-probes.test.ts).
beforeAll(async () => {
  await db.sql`update private.sync_settings set probe_grace_seconds = 0`;
});

afterEach(async () => {
  await drainQueue(db.sql);
  await db.sql`delete from public.sync_schedules`;
});

const claims = (userId: string) => ({ sub: userId, role: 'authenticated', aud: 'authenticated' });

/** The owner writes a schedule under RLS, as the orchestrator does. */
async function setSchedule(userId: string, portalId: string, fields: Record<string, unknown> = {}) {
  return asUser(db.sql, claims(userId), (tx) => tx`
    insert into public.sync_schedules ${tx({ portal_id: portalId, ...fields })}
    on conflict (portal_id) do update set ${tx(fields, ...Object.keys(fields).filter((k) => k !== 'portal_id'))}
    returning *`);
}

/** A request through PostgREST, as it sets up each one: role, claims and the request's settings, for the transaction. */
async function viaPostgrest<T>(userId: string | null, method: string, fn: (tx: TransactionSql) => Promise<T>): Promise<T> {
  return (await db.sql.begin(async (tx) => {
    await tx`select set_config('role', ${userId ? 'authenticated' : 'service_role'}, true),
                    set_config('request.jwt.claims', ${JSON.stringify(userId ? claims(userId) : { role: 'service_role' })}, true),
                    set_config('request.method', ${method}, true), set_config('request.path', '/sync_schedules', true)`;
    return fn(tx);
  })) as T;
}

async function tick(sql: Sql = db.sql): Promise<number> {
  const [row] = await sql`select public.schedule_due_syncs() as n`;
  return row!.n as number;
}

async function runsOf(portalId: string) {
  return db.sql`select id, fetch_mode, trigger, requested_by, content_types, finished_at from public.runs where portal_id = ${portalId} order by created_at`;
}

/** Makes the portal's schedule due now (the tick's clock is the database's). */
async function makeDue(portalId: string, which: 'incremental' | 'full' | 'both' = 'incremental') {
  await db.sql`update public.sync_schedules set
      next_incremental_at = case when ${which} in ('incremental', 'both') then now() - interval '1 second' else next_incremental_at end,
      next_full_at = case when ${which} in ('full', 'both') then now() - interval '1 second' else next_full_at end
    where portal_id = ${portalId}`;
}

describe('sync schedules', () => {
  it('the owner creates and changes a schedule under RLS; nobody else sees or writes it', async () => {
    const a = await createUserWithPortal(db.sql);
    const b = await createUserWithPortal(db.sql);
    const [created] = await setSchedule(a.userId, a.portalId, { incremental_every_minutes: 5 });
    expect(created).toMatchObject({ owner_id: a.userId, incremental_every_minutes: 5, full_every_minutes: 1440, paused: false });
    expect((created!.content_types as string[]).length).toBe(8);
    expect((created!.next_incremental_at as Date).getTime()).toBeLessThanOrEqual(Date.now() + 1_000);
    // The first full reconcile: the portal's daily slot at least half a day away.
    expect((created!.next_full_at as Date).getTime()).toBeGreaterThan(Date.now() + 12 * 3_600_000);
    expect((created!.next_full_at as Date).getTime()).toBeLessThanOrEqual(Date.now() + 36 * 3_600_000 + 1_000);

    // b cannot create one for a's portal, nor see or change a's.
    const denied = await pgError(() => setSchedule(b.userId, a.portalId, { incremental_every_minutes: 1 }));
    expect(denied.code).toBe('P0002');
    const seen = await asUser(db.sql, claims(b.userId), (tx) => tx`select * from public.sync_schedules`);
    expect(seen).toHaveLength(0);
    const changed = await asUser(db.sql, claims(b.userId), (tx) => tx`update public.sync_schedules set paused = true returning 1`);
    expect(changed).toHaveLength(0);
    // The owner may not set the due times or the owner.
    const own = await pgError(() => asUser(db.sql, claims(a.userId), (tx) => tx`update public.sync_schedules set next_full_at = now()`));
    expect(own.code).toBe('42501');
    // Bad values are refused by the table.
    expect((await pgError(() => setSchedule(a.userId, a.portalId, { incremental_every_minutes: 0 }))).code).toBe('23514');
    expect((await pgError(() => setSchedule(a.userId, a.portalId, { content_types: ['nope'] }))).code).toBe('22023');

    const [slower] = await setSchedule(a.userId, a.portalId, { incremental_every_minutes: 60, content_types: ['blog_posts'] });
    expect(slower).toMatchObject({ incremental_every_minutes: 60, content_types: ['blog_posts'] });
  });

  it('a portal that is not the writer’s is "not found", as one that does not exist: the answer does not tell them apart', async () => {
    const a = await createUserWithPortal(db.sql);
    const b = await createUserWithPortal(db.sql);
    const nobodys = crypto.randomUUID();
    for (const write of [(user: string, portal: string) => setSchedule(user, portal, { incremental_every_minutes: 1 }), (user: string, portal: string) => viaPostgrest(user, 'POST', (tx) => tx`insert into public.sync_schedules (portal_id) values (${portal})`)]) {
      const others = await pgError(() => write(b.userId, a.portalId));
      const missing = await pgError(() => write(b.userId, nobodys));
      expect([others.code, others.message]).toEqual(['P0002', `sync schedule: portal ${a.portalId} not found`]);
      expect([missing.code, missing.message]).toEqual(['P0002', `sync schedule: portal ${nobodys} not found`]);
    }
    // The owner, and the service role, still create it.
    expect((await setSchedule(a.userId, a.portalId, { incremental_every_minutes: 1 }))[0]).toMatchObject({ owner_id: a.userId });
    await db.sql`delete from public.sync_schedules`;
    const [made] = await viaPostgrest(null, 'POST', (tx) => tx`insert into public.sync_schedules (portal_id) values (${a.portalId}) returning owner_id`);
    expect(made).toEqual({ owner_id: a.userId });
  });

  it('a user’s writes through PostgREST take the per-user write limit, once a request; over it, 429 RATE_LIMITED and nothing written', async () => {
    const a = await createUserWithPortal(db.sql);
    const counted = async () => Number((await db.sql`select cardinality(written_at) as n from private.user_write_log where user_id = ${a.userId}`)[0]?.n ?? 0);
    const patch = (fields: Record<string, unknown>, user: string | null = a.userId) =>
      viaPostgrest(user, 'PATCH', (tx) => tx`update public.sync_schedules set ${tx(fields)} where portal_id = ${a.portalId}`);
    await db.sql`update private.write_limit_settings set max_writes = 3, window_seconds = 60`;
    try {
      // The orchestrator's own write (counted by its handler before it writes): not counted again.
      await setSchedule(a.userId, a.portalId, { incremental_every_minutes: 5 });
      expect(await counted()).toBe(0);
      // An insert and updates through PostgREST count; one request writing twice counts once.
      await db.sql`delete from public.sync_schedules`;
      await viaPostgrest(a.userId, 'POST', (tx) => tx`insert into public.sync_schedules (portal_id, incremental_every_minutes) values (${a.portalId}, 5)`);
      await viaPostgrest(a.userId, 'PATCH', async (tx) => {
        await tx`update public.sync_schedules set paused = true where portal_id = ${a.portalId}`;
        await tx`update public.sync_schedules set overlap_seconds = 60 where portal_id = ${a.portalId}`;
      });
      await patch({ incremental_every_minutes: 1 });
      expect(await counted()).toBe(3);
      let raised: { code?: string; message?: string; detail?: string } = {};
      await patch({ paused: false }).catch((e: typeof raised) => (raised = e));
      // What PostgREST turns into the response: 429, Retry-After, {code, message} (docs.postgrest.org, errors: RAISE with PGRST).
      expect(raised.code).toBe('PGRST');
      expect(JSON.parse(raised.message!)).toEqual({ code: 'RATE_LIMITED', message: expect.stringMatching(/^Too many changes in a short time: try again in \d+ s\.$/) });
      expect(JSON.parse(raised.detail!)).toEqual({ status: 429, headers: { 'Retry-After': expect.stringMatching(/^[1-9]\d*$/) } });
      const [kept] = await db.sql`select paused, overlap_seconds, incremental_every_minutes from public.sync_schedules where portal_id = ${a.portalId}`;
      expect(kept).toEqual({ paused: true, overlap_seconds: 60, incremental_every_minutes: 1 });
      // The service role through PostgREST is not a user: not limited, not counted.
      await patch({ paused: false }, null);
      expect(await counted()).toBe(3);
      // Once the window has passed (back-dated), the user writes again.
      await db.sql`update private.user_write_log set written_at = array(select t - interval '61 seconds' from unnest(written_at) t) where user_id = ${a.userId}`;
      await patch({ paused: true });
      expect(await counted()).toBe(1);
    } finally {
      await db.sql`update private.write_limit_settings set max_writes = 60, window_seconds = 60`;
    }
  });

  it('a due schedule creates one scheduled run; the next is due after the interval; full reconcile when its time comes', async () => {
    const a = await createUserWithPortal(db.sql);
    await setSchedule(a.userId, a.portalId, { incremental_every_minutes: 10, content_types: ['blog_posts', 'site_pages'] });
    expect(await tick()).toBe(1);
    const [run] = await runsOf(a.portalId);
    expect(run).toMatchObject({ fetch_mode: 'incremental', trigger: 'schedule', requested_by: a.userId, content_types: ['blog_posts', 'site_pages'] });
    const [s] = await db.sql`select *, private.sync_slot(portal_id, 10, now() + interval '10 seconds') as slot
      from public.sync_schedules where portal_id = ${a.portalId}`;
    expect(s!.next_incremental_at).toEqual(s!.slot);
    expect((s!.next_incremental_at as Date).getTime()).toBeLessThanOrEqual(Date.now() + 10 * 60_000 + 10_000);
    expect(s!.last_run_id).toBe(run!.id);
    // Not due: nothing.
    expect(await tick()).toBe(0);

    await drainQueue(db.sql);
    await makeDue(a.portalId, 'both');
    expect(await tick()).toBe(1);
    const runs = await runsOf(a.portalId);
    expect(runs[1]).toMatchObject({ fetch_mode: 'full', trigger: 'schedule' });
    const [s2] = await db.sql`select *, private.sync_slot(portal_id, 1440, now() + interval '10 seconds') as slot
      from public.sync_schedules where portal_id = ${a.portalId}`;
    expect(s2!.next_full_at).toEqual(s2!.slot);
    expect((s2!.next_full_at as Date).getTime()).toBeGreaterThan(Date.now());
  });

  it('a tick that starts a little before the due time still runs a one-minute schedule (ticks are a minute apart too)', async () => {
    const a = await createUserWithPortal(db.sql);
    await setSchedule(a.userId, a.portalId, { incremental_every_minutes: 1, content_types: ['blog_posts'] });
    await db.sql`update public.sync_schedules set next_incremental_at = now() + interval '30 seconds' where portal_id = ${a.portalId}`;
    expect(await tick()).toBe(0);
    await db.sql`update public.sync_schedules set next_incremental_at = now() + interval '3 seconds' where portal_id = ${a.portalId}`;
    expect(await tick()).toBe(1);
    // The next is after this tick's 10 s and no later than the next tick's.
    const [s] = await db.sql`select next_incremental_at > now() + interval '10 seconds' and next_incremental_at <= now() + interval '70 seconds' as ok
      from public.sync_schedules where portal_id = ${a.portalId}`;
    expect(s!.ok).toBe(true);
  });

  it('never piles onto an active run: a busy type gets no second job, and a full reconcile waits for it', async () => {
    const a = await createUserWithPortal(db.sql);
    await setSchedule(a.userId, a.portalId, { incremental_every_minutes: 1, content_types: ['blog_posts', 'site_pages'] });
    // A user's fetch of blog_posts is running.
    const user = await createRun(db.sql, { portalId: a.portalId, requestedBy: a.userId, kind: 'fetch', contentTypes: ['blog_posts'] });
    expect(await tick()).toBe(1);
    const runs = await runsOf(a.portalId);
    expect(runs).toHaveLength(2);
    expect(runs[1]!.content_types).toEqual(['site_pages']);
    // Due again while both are active: no run at all.
    await makeDue(a.portalId, 'both');
    expect(await tick()).toBe(0);
    expect(await runsOf(a.portalId)).toHaveLength(2);
    const [s] = await db.sql`select next_full_at <= now() as full_still_due from public.sync_schedules where portal_id = ${a.portalId}`;
    expect(s!.full_still_due).toBe(true);
    const [active] = await db.sql`select count(*)::int as n from public.jobs where portal_id = ${a.portalId} and status in ('pending', 'running')`;
    expect(active!.n).toBe(2);
    expect(user.runId).not.toBeNull();
  });

  it('paused and disconnected portals do not schedule', async () => {
    const a = await createUserWithPortal(db.sql);
    const b = await createUserWithPortal(db.sql);
    await setSchedule(a.userId, a.portalId, { incremental_every_minutes: 1, paused: true });
    await setSchedule(b.userId, b.portalId, { incremental_every_minutes: 1 });
    await db.sql`select public.disconnect_portal(${b.portalId}, 'The HubSpot app was uninstalled.')`;
    await makeDue(a.portalId, 'both');
    await makeDue(b.portalId, 'both');
    expect(await tick()).toBe(0);
    expect(await runsOf(a.portalId)).toHaveLength(0);
    expect(await runsOf(b.portalId)).toHaveLength(0);
    // Unpaused: it runs.
    await setSchedule(a.userId, a.portalId, { paused: false });
    expect(await tick()).toBe(1);
  });

  it('a changed interval moves the next due time: later for a longer one, sooner for a shorter; a due time stays due', async () => {
    const a = await createUserWithPortal(db.sql);
    await setSchedule(a.userId, a.portalId, { incremental_every_minutes: 15, content_types: ['blog_posts'] });
    expect(await tick()).toBe(1);
    const next = async () => ((await db.sql`select next_incremental_at from public.sync_schedules where portal_id = ${a.portalId}`)[0]!
      .next_incremental_at as Date).getTime();
    const n15 = await next();
    const [hourly] = await setSchedule(a.userId, a.portalId, { incremental_every_minutes: 60 });
    // The hourly slot at least half an hour after the last run (n15 less 15 minutes).
    expect((hourly!.next_incremental_at as Date).getTime()).toBeGreaterThan(n15 + 15 * 60_000);
    expect((hourly!.next_incremental_at as Date).getTime()).toBeLessThanOrEqual(n15 - 15 * 60_000 + 90 * 60_000);
    const n60 = await next();
    const [often] = await setSchedule(a.userId, a.portalId, { incremental_every_minutes: 5 });
    expect((often!.next_incremental_at as Date).getTime()).toBeLessThan(n60);
    await makeDue(a.portalId);
    const [due] = await setSchedule(a.userId, a.portalId, { incremental_every_minutes: 30 });
    expect((due!.next_incremental_at as Date).getTime()).toBeLessThanOrEqual(Date.now());
  });

  it('portals scheduled together spread over their interval: each falls due on its own slot', async () => {
    const portals = await Promise.all(Array.from({ length: 60 }, () => createUserWithPortal(db.sql)));
    for (const p of portals) await setSchedule(p.userId, p.portalId, { incremental_every_minutes: 15, content_types: ['blog_posts'] });
    // The tick's clock lies between these two reads: a slot passing in between may move a portal one interval on.
    const [before] = await db.sql`select now() as t`;
    expect(await tick()).toBe(portals.length);
    const [spread] = await db.sql`select count(distinct next_incremental_at)::int as distinct_times,
        extract(epoch from max(next_incremental_at) - min(next_incremental_at))::int as seconds,
        bool_and(next_incremental_at in (private.sync_slot(portal_id, 15, ${before!.t as Date}::timestamptz + interval '10 seconds'),
                                         private.sync_slot(portal_id, 15, now() + interval '10 seconds'))) as on_slots
      from public.sync_schedules`;
    expect(spread!.on_slots).toBe(true);
    expect(spread!.distinct_times).toBeGreaterThan(50);
    expect(spread!.seconds).toBeGreaterThan(10 * 60);
    // A slot is the interval's: the next after a slot is one interval later.
    const [slot] = await db.sql`select extract(epoch from private.sync_slot(${portals[0]!.portalId}, 15, s) - s)::int as gap
      from (select private.sync_slot(${portals[0]!.portalId}, 15, now()) as s) x`;
    expect(slot!.gap).toBe(15 * 60);
  }, 60_000);

  it('one tick creates at most max_runs_per_tick runs, the longest due first: 10,000 due schedules, the rest left due', async () => {
    const n = 10_000;
    // Users, portals and schedules in bulk; schedule i was due i seconds ago.
    await db.sql`insert into auth.users (id, email, aud, role)
      select md5('tick-user-' || i)::uuid, 'tick-' || i || '@example.test', 'authenticated', 'authenticated' from generate_series(1, ${n}) i`;
    await db.sql`insert into public.portals (id, owner_id, hubspot_portal_id, name)
      select md5('tick-portal-' || i)::uuid, md5('tick-user-' || i)::uuid, 5000000000 + i, 'Tick portal ' || i from generate_series(1, ${n}) i`;
    await db.sql`insert into public.sync_schedules (portal_id, content_types, incremental_every_minutes)
      select md5('tick-portal-' || i)::uuid, array['blog_posts'], 1 from generate_series(1, ${n}) i`;
    await db.sql`update public.sync_schedules s set next_incremental_at = now() - make_interval(secs => p.hubspot_portal_id - 5000000000)
      from public.portals p where p.id = s.portal_id`;
    await db.sql`update private.sync_settings set max_runs_per_tick = 100`;
    try {
      for (let round = 1; round <= 2; round++) {
        expect(await tick()).toBe(100);
        const [r] = await db.sql`select count(*)::int as runs, min(p.hubspot_portal_id - 5000000000)::int as newest_due
          from public.runs r join public.portals p on p.id = r.portal_id where p.hubspot_portal_id > 5000000000`;
        // The 100 × round longest due: schedules n .. n - 100 × round + 1.
        expect(r).toEqual({ runs: 100 * round, newest_due: n - 100 * round + 1 });
        const [due] = await db.sql`select count(*)::int as n from public.sync_schedules where next_incremental_at <= now()`;
        expect(due!.n).toBe(n - 100 * round);
      }
    } finally {
      await db.sql`update private.sync_settings set max_runs_per_tick = default`;
      await drainQueue(db.sql);
      await db.sql`delete from public.portals where hubspot_portal_id > 5000000000`;
      await db.sql`delete from auth.users where email like 'tick-%@example.test'`;
    }
  }, 120_000);

  it('bounded ticks racing on many connections: each within the bound, no schedule twice, every due one created in the end', async () => {
    const portals = await Promise.all(Array.from({ length: 40 }, () => createUserWithPortal(db.sql)));
    for (const p of portals) await setSchedule(p.userId, p.portalId, { incremental_every_minutes: 1, content_types: ['blog_posts'] });
    await db.sql`update public.sync_schedules set next_incremental_at = now() - interval '1 second'`;
    await db.sql`update private.sync_settings set max_runs_per_tick = 3`;
    const conns = Array.from({ length: 8 }, () => connectDatabase(db.url, { max: 1 }));
    try {
      const counts: number[] = [];
      for (let round = 0; round < 10; round++) counts.push(...(await Promise.all(conns.map((c) => tick(c)))));
      expect(Math.max(...counts)).toBeLessThanOrEqual(3);
      expect(counts.reduce((a, b) => a + b, 0)).toBe(portals.length);
      const [runs] = await db.sql`select count(*)::int as n, count(distinct portal_id)::int as portals from public.runs where finished_at is null`;
      expect(runs).toEqual({ n: portals.length, portals: portals.length });
      const [due] = await db.sql`select count(*)::int as n from public.sync_schedules where next_incremental_at <= now()`;
      expect(due!.n).toBe(0);
    } finally {
      await db.sql`update private.sync_settings set max_runs_per_tick = default`;
      await Promise.all(conns.map((c) => c.end()));
    }
  }, 60_000);

  it('ticks racing on many connections create exactly one run per due schedule', async () => {
    const portals = await Promise.all(Array.from({ length: 24 }, () => createUserWithPortal(db.sql)));
    for (const p of portals) await setSchedule(p.userId, p.portalId, { incremental_every_minutes: 1, content_types: ['blog_posts', 'hubdb_rows'] });
    const conns = Array.from({ length: 8 }, () => connectDatabase(db.url, { max: 1 }));
    try {
      for (let round = 0; round < 3; round++) {
        await drainQueue(db.sql);
        await db.sql`update public.sync_schedules set next_incremental_at = now() - interval '1 second'`;
        const counts = await Promise.all(conns.map((c) => tick(c)));
        expect(counts.reduce((a, b) => a + b, 0), `round ${round}`).toBe(portals.length);
        const [jobs] = await db.sql`select count(*)::int as n, count(distinct (portal_id, content_type))::int as distinct_n
          from public.jobs where status in ('pending', 'running')`;
        expect(jobs).toEqual({ n: portals.length * 2, distinct_n: portals.length * 2 });
        const [due] = await db.sql`select count(*)::int as n from public.sync_schedules where next_incremental_at <= now()`;
        expect(due!.n).toBe(0);
      }
    } finally {
      await Promise.all(conns.map((c) => c.end()));
    }
  }, 60_000);
});
