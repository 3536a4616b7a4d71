// Sync schedules: written by the portal's owner under RLS, run by
// public.schedule_due_syncs (the pg_cron tick) through create_run's dedup.
// Due runs, dedup against active runs, pause, disconnect, and many ticks racing
// on real connections. docs/sync.md.
import { afterEach, describe, expect, it } from 'vitest';
import { connectDatabase, asUser, type Sql } from '../shared/db.ts';
import { createRun } from '../shared/sql/runs.ts';
import { createUserWithPortal, useTestDatabase } from './support/database.ts';
import { drainQueue, pgError } from './support/queue-fixtures.ts';

const db = useTestDatabase();

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
    expect((created!.next_full_at as Date).getTime()).toBeGreaterThan(Date.now() + 23 * 3_600_000);

    // b cannot create one for a's portal, nor see or change a's.
    const denied = await pgError(() => setSchedule(b.userId, a.portalId, { incremental_every_minutes: 1 }));
    expect(denied.code).toBe('42501');
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

  it('a due schedule creates one scheduled run; the next is due after the interval; full reconcile when its time comes', async () => {
    const a = await createUserWithPortal(db.sql);
    await setSchedule(a.userId, a.portalId, { incremental_every_minutes: 10, content_types: ['blog_posts', 'site_pages'] });
    expect(await tick()).toBe(1);
    const [run] = await runsOf(a.portalId);
    expect(run).toMatchObject({ fetch_mode: 'incremental', trigger: 'schedule', requested_by: a.userId, content_types: ['blog_posts', 'site_pages'] });
    const [s] = await db.sql`select * from public.sync_schedules where portal_id = ${a.portalId}`;
    expect((s!.next_incremental_at as Date).getTime()).toBeGreaterThan(Date.now() + 9 * 60_000);
    expect(s!.last_run_id).toBe(run!.id);
    // Not due: nothing.
    expect(await tick()).toBe(0);

    await drainQueue(db.sql);
    await makeDue(a.portalId, 'both');
    expect(await tick()).toBe(1);
    const runs = await runsOf(a.portalId);
    expect(runs[1]).toMatchObject({ fetch_mode: 'full', trigger: 'schedule' });
    const [s2] = await db.sql`select * from public.sync_schedules where portal_id = ${a.portalId}`;
    expect((s2!.next_full_at as Date).getTime()).toBeGreaterThan(Date.now() + 23 * 3_600_000);
  });

  it('a tick that starts a little before the due time still runs a one-minute schedule (ticks are a minute apart too)', async () => {
    const a = await createUserWithPortal(db.sql);
    await setSchedule(a.userId, a.portalId, { incremental_every_minutes: 1, content_types: ['blog_posts'] });
    await db.sql`update public.sync_schedules set next_incremental_at = now() + interval '30 seconds' where portal_id = ${a.portalId}`;
    expect(await tick()).toBe(0);
    await db.sql`update public.sync_schedules set next_incremental_at = now() + interval '3 seconds' where portal_id = ${a.portalId}`;
    expect(await tick()).toBe(1);
    const [s] = await db.sql`select next_incremental_at from public.sync_schedules where portal_id = ${a.portalId}`;
    expect((s!.next_incremental_at as Date).getTime()).toBeGreaterThan(Date.now() + 50_000);
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
