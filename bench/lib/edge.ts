// Pieces the edge-runtime scenarios (7 and 8) share: a user with a connected
// portal, triggering a run over HTTP as that user, waiting for runs to settle,
// the cron stand-in (pg_cron is not in embedded Postgres), the worker isolates'
// CPU, and a fetch's duration at exactly HubSpot's limit.
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { LocalSystem } from '../../local/system.ts';
import type { Sql } from '../../shared/db.ts';
import { connectPrivateAppPortal } from '../../shared/hubspot/portal-connect.ts';
import type { ContentType } from '../../shared/content-types.ts';
import { PAGE_SIZE } from '../../shared/hubspot/content-types.ts';

export interface BenchPortal {
  userId: string;
  portalId: string;
  hubspotPortalId: number;
  /** The owner's signed user JWT (signed up front, so signing never lands in a measured request). */
  jwt: string;
  /** The private-app token the simulator knows the portal by (the bench's own reads of HubSpot use it). */
  token: string;
}

/** A user with one portal connected to a simulator portal of `sizes` (own token, so its own rate limit). */
export async function addBenchPortal(
  sql: Sql, sys: LocalSystem,
  opts: { hubspotPortalId: number; name: string; sizes: Partial<Record<ContentType, number>>; hubdbTables: number },
): Promise<BenchPortal> {
  const userId = randomUUID();
  await sql`insert into auth.users (id, email, aud, role) values (${userId}, ${`${userId}@bench.test`}, 'authenticated', 'authenticated')`;
  const token = `pat-bench-${randomUUID()}`;
  // Item JSON rendered now: HubSpot's encoding CPU is not ours, and would share these 2 cores in the measured phase.
  sys.sim.addPortal({ portalId: opts.hubspotPortalId, token, sizes: opts.sizes, hubdbTables: opts.hubdbTables, prerender: true });
  const portalId = await connectPrivateAppPortal(sql, sys.tokenKeys, { ownerId: userId, hubspotPortalId: opts.hubspotPortalId, name: opts.name, accessToken: token });
  return { userId, portalId, hubspotPortalId: opts.hubspotPortalId, jwt: await sys.keys.signUserToken(userId), token };
}

export interface Trigger {
  /** Date.now() when the POST was sent. */
  sentAt: number;
  status: number;
  runId: string | null;
  error?: string;
}

/** POSTs a run to the orchestrator as the portal's owner, as a user's browser would. */
export async function triggerRun(sys: LocalSystem, portal: BenchPortal, kind: 'fetch' | 'export', contentTypes: readonly ContentType[]): Promise<Trigger> {
  const sentAt = Date.now();
  try {
    const res = await fetch(sys.functions.functionUrl('orchestrator'), {
      method: 'POST', headers: { Authorization: `Bearer ${portal.jwt}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ portalId: portal.portalId, kind, contentTypes }),
    });
    const body = (await res.json().catch(() => ({}))) as { runId?: string; code?: string };
    return { sentAt, status: res.status, runId: body.runId ?? null, ...(res.status === 201 && body.runId ? {} : { error: `HTTP ${res.status} ${JSON.stringify(body)}` }) };
  } catch (e) {
    return { sentAt, status: 0, runId: null, error: e instanceof Error ? e.message : String(e) };
  }
}

/** Polls until every run has finished_at; throws after `timeoutMs` naming how many are left. */
export async function waitForRunsSettled(sql: Sql, runIds: readonly string[], timeoutMs: number, pollMs = 250): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const [row] = await sql`select count(*) filter (where finished_at is null)::int as open from public.runs where id = any(${runIds as string[]}::uuid[])`;
    if (Number(row?.open ?? 0) === 0) return;
    if (performance.now() > deadline) throw new Error(`${String(row?.open)} of ${runIds.length} runs did not settle within ${Math.round(timeoutMs / 1000)} s`);
    await sleep(pollMs);
  }
}

/**
 * Cron, as pg_cron would call it: every `periodMs`, a background invocation of
 * the worker with the worker secret. stop() ends the loop (waits for it).
 */
export function startCron(sys: LocalSystem, periodMs = 60_000): { invocations(): number; stop(): Promise<void> } {
  let on = true;
  let invocations = 0;
  const loop = (async () => {
    while (on) {
      for (let waited = 0; waited < periodMs && on; waited += 250) await sleep(250);
      if (!on) break;
      invocations++;
      await fetch(sys.functions.functionUrl('worker'), {
        method: 'POST', headers: { Authorization: `Bearer ${sys.workerSecret}`, 'Content-Type': 'application/json' },
        body: JSON.stringify({ source: 'cron', mode: 'background' }),
      }).then((r) => r.body?.cancel()).catch(() => {});
    }
  })();
  return {
    invocations: () => invocations,
    async stop() {
      on = false;
      await loop;
    },
  };
}

/** CPU ms every isolate of function `name` has used so far (finished ones and live ones). */
export function functionCpuMs(sys: LocalSystem, name: string): number {
  const stats = sys.functions.stats()[name]!;
  const finished = stats.cpuMsPerIsolate.reduce((a, b) => a + b, 0);
  const live = sys.functions.isolates(name).reduce((a, i) => a + i.cpuMs, 0);
  return finished + live;
}

/** CPU ms every worker isolate has used so far (finished ones and live ones). */
export const workerCpuMs = (sys: LocalSystem): number => functionCpuMs(sys, 'worker');

/**
 * The HubSpot requests a fetch of these sizes needs at the least: one page per
 * 100 items (1,000 for HubDB), at least one per type; HubDB rows a page per
 * table plus one tables list. `withCounts`: plus the orchestrator's count
 * calls at trigger time (a limit=1 list per type; for HubDB rows the tables
 * list's rowCount).
 */
export function idealFetchRequests(sizes: Record<string, number>, hubdbTables: number, withCounts = false): number {
  let requests = 0;
  for (const [type, n] of Object.entries(sizes)) {
    if (type === 'hubdb_rows') {
      const perTable = Math.ceil(n / hubdbTables);
      requests += hubdbTables * Math.max(1, Math.ceil(perTable / PAGE_SIZE.hubdb_rows)) + 1;
    } else requests += Math.max(1, Math.ceil(n / PAGE_SIZE[type as ContentType]));
    if (withCounts) requests++;
  }
  return requests;
}

/** The fetch's duration at exactly HubSpot's limit: idealFetchRequests sent at `limitPer10s` per 10 s. */
export function idealFetchSeconds(sizes: Record<string, number>, hubdbTables: number, limitPer10s: number, withCounts = false): number {
  return (idealFetchRequests(sizes, hubdbTables, withCounts) * 10) / limitPer10s;
}
