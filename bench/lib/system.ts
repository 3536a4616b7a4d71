// The whole system for the HTTP scenarios (3 and 6): the HubSpot simulator and
// both edge functions under real Deno behind the /functions/v1 gateway
// (local/system.ts), with users and tiny portals seeded by SQL and
// their tokens stored sealed under the functions' keys, as the orchestrator stores them.
import type postgres from 'postgres';
import { CONTENT_TYPES } from '../../shared/content-types.ts';
import { connectPrivateAppPortal } from '../../shared/hubspot/portal-connect.ts';
import { startLocalSystem, type LocalSystem } from '../../local/system.ts';
import { pool } from './pg.ts';
import { benchIds, seedUsersAndPortals } from './seed.ts';
import { setTimeout as sleep } from 'node:timers/promises';

/** One item of every type: a run's 8 fetch jobs take one or two requests each. */
const TINY = { site_pages: 1, landing_pages: 1, blog_posts: 1, blog_authors: 1, blog_tags: 1, hubdb_tables: 1, hubdb_rows: 1, url_redirects: 1 };

export interface BenchSystem {
  sys: LocalSystem;
  sql: postgres.Sql;
  /** Creates `count` users, each with one connected portal (DB + simulator); returns their indexes. */
  addPortals(count: number): Promise<number[]>;
  /** POSTs a fetch run for portal `i` as its owner; the status, the run id and the client-side latency. */
  trigger(i: number): Promise<{ status: number; runId: string | null; startedAtMs: number; latencyMs: number; error?: string }>;
  /** Waits until the runs are finished; returns how many finished `completed`. */
  waitForRuns(runIds: readonly string[], timeoutMs: number): Promise<number>;
  stop(): Promise<void>;
}

export async function startBenchSystem(dbUrl: string, firstPortal: number): Promise<BenchSystem> {
  const sys = await startLocalSystem(dbUrl);
  const sql = pool(dbUrl, 2);
  let next = firstPortal;
  const signed = new Map<number, string>();
  return {
    sys,
    sql,
    async addPortals(count) {
      const first = next;
      next += count;
      await seedUsersAndPortals(sql, first, count);
      const ids = Array.from({ length: count }, (_, k) => first + k);
      for (const i of ids) {
        const token = `pat-bench-${i}-${crypto.randomUUID()}`;
        const { userId, hubspotPortalId } = benchIds(i);
        sys.sim.addPortal({ portalId: hubspotPortalId, token, sizes: TINY, hubdbTables: 1 });
        await connectPrivateAppPortal(sql, sys.tokenKeys, { ownerId: userId, hubspotPortalId, name: `Bench portal ${i}`, accessToken: token });
      }
      // Sign every token now so signing cost never lands inside a measured request.
      await Promise.all(ids.map(async (i) => signed.set(i, await sys.keys.signUserToken(benchIds(i).userId))));
      return ids;
    },
    async trigger(i) {
      const token = signed.get(i) ?? (await sys.keys.signUserToken(benchIds(i).userId));
      const startedAtMs = Date.now();
      const t0 = performance.now();
      try {
        const res = await fetch(sys.functions.functionUrl('orchestrator'), {
          method: 'POST',
          headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
          body: JSON.stringify({ portalId: benchIds(i).portalId, contentTypes: [...CONTENT_TYPES] }),
        });
        const body = (await res.json().catch(() => ({}))) as { runId?: string; code?: string };
        const latencyMs = performance.now() - t0;
        return { status: res.status, runId: body.runId ?? null, startedAtMs, latencyMs, ...(res.status === 201 ? {} : { error: body.code ?? `HTTP ${res.status}` }) };
      } catch (e) {
        return { status: 0, runId: null, startedAtMs, latencyMs: performance.now() - t0, error: e instanceof Error ? e.message : String(e) };
      }
    },
    async waitForRuns(runIds, timeoutMs) {
      const deadline = performance.now() + timeoutMs;
      let nudgeAt = performance.now() + 5000;
      for (;;) {
        const [row] = await sql`select count(*) filter (where finished_at is not null)::int as finished,
            count(*) filter (where status = 'completed')::int as completed from public.runs where id = any(${runIds as string[]}::uuid[])`;
        if ((row?.finished ?? 0) >= runIds.length) return Number(row?.completed ?? 0);
        if (performance.now() > deadline) return Number(row?.completed ?? 0);
        // Every 5 s, invoke the worker as the minutely cron would (retries with backoff, released jobs).
        if (performance.now() > nudgeAt) {
          nudgeAt = performance.now() + 5000;
          sys.invokeWorker().catch(() => {});
        }
        await sleep(50);
      }
    },
    async stop() {
      await sql.end({ timeout: 5 });
      await sys.stop();
    },
  };
}
