// Scenario 13: publish. 10,000 edits of the scenario-8 portal's five batch
// types (site pages, landing pages, blog posts, authors, tags) go back to
// HubSpot as the product does it (docs/publish.md): a plan (the plan run reads
// every edited item), the plan approved by its id, the publish run (each batch
// re-read, then written), then a rollback (the restore run writes the
// pre-images back). The functions run in the local edge runtime with CPU
// limits small enough that worker isolates are cut off mid-work, again and
// again (beforeunload, the jobs released, the worker continuing itself), the
// worker not told (its CPU budget stays the hosted default). HubSpot changes
// under the publish through the simulator's hooks: 2% of the edited items
// between plan and apply, 1% during the apply just before their batch's
// re-read, and a few same-field edits of pages and posts inside a batch's
// re-read → write window. The simulator's per-item write counter, its audit
// log and the items read back over HTTP say what happened in HubSpot. A
// smaller sub-run on a portal of its own covers HubDB rows and URL redirects.
import { setTimeout as sleep } from 'node:timers/promises';
import { startLocalSystem, type LocalSystem } from '../../local/system.ts';
import type { ContentType } from '../../shared/content-types.ts';
import { connectDatabase, type Sql } from '../../shared/db.ts';
import { approvePublishPlan, createPublishPlan, rollbackPublishRun } from '../../shared/sql/publish.ts';
import type { BenchContext, ScenarioResult } from '../lib/context.ts';
import { addBenchPortal, workerCpuMs } from '../lib/edge.ts';
import { migratedDatabase, postgresCpuMs } from '../lib/pg.ts';
import { functionsPooler } from '../lib/pooler.ts';
import { statementTrace } from '../lib/statements.ts';
import { atLeast, atMost, figure, type Figure, type Goal } from '../lib/report.ts';
import { round } from '../lib/stats.ts';
import {
  batchTimeline, countRequests, fetchCopy, fieldsOf, firstField, hubspotNow, pick, portalRequests, runToEnd, sameJson, seedEdits, seeded, type Json,
} from './publish-harness.ts';
import { hubdbAndRedirects } from './publish-sub-run.ts';

const S = '13';
const LIMIT = 190;
type Batch = 'site_pages' | 'landing_pages' | 'blog_posts' | 'blog_authors' | 'blog_tags';
const TYPES: readonly Batch[] = ['site_pages', 'landing_pages', 'blog_posts', 'blog_authors', 'blog_tags'];
/** Pages and posts keep revisions: their window edits can be found afterwards. */
const VERSIONED: readonly Batch[] = ['site_pages', 'landing_pages', 'blog_posts'];
const CHANGED_BEFORE_APPLY = 0.02;
const CHANGED_DURING_APPLY = 0.01;

interface Shape {
  /** The simulator portal: scenario 8's (60k posts, 100k HubDB rows in 20 tables, 20k site pages) with landing pages, authors and tags. */
  sizes: Partial<Record<ContentType, number>>;
  hubdbTables: number;
  edits: Record<Batch, number>;
  windowEdits: number;
  sub: { rows: number; tables: number; redirects: number };
  fetchTimeoutMs: number;
  runTimeoutMs: number;
}
const FULL: Shape = {
  sizes: { blog_posts: 60_000, hubdb_rows: 100_000, site_pages: 20_000, landing_pages: 2_000, blog_authors: 200, blog_tags: 500 },
  hubdbTables: 20,
  edits: { site_pages: 3_000, landing_pages: 1_500, blog_posts: 5_000, blog_authors: 200, blog_tags: 300 },
  windowEdits: 5,
  sub: { rows: 200, tables: 2, redirects: 100 },
  fetchTimeoutMs: 900_000,
  runTimeoutMs: 600_000,
};
const QUICK: Shape = {
  sizes: { blog_posts: 300, hubdb_rows: 100, site_pages: 200, landing_pages: 60, blog_authors: 10, blog_tags: 30 },
  hubdbTables: 2,
  edits: { site_pages: 100, landing_pages: 50, blog_posts: 150, blog_authors: 10, blog_tags: 30 },
  windowEdits: 2,
  sub: { rows: 20, tables: 2, redirects: 10 },
  fetchTimeoutMs: 120_000,
  runTimeoutMs: 120_000,
};

/**
 * The worker isolates' CPU limits in the local edge runtime: retired at the
 * soft limit, beforeunload("cpu") at half the hard limit, killed at the hard
 * limit. The worker keeps its hosted CPU budget (1,500 ms), so it never sees a
 * cut-off coming: each one lands mid-batch (a re-read, a write, a record).
 */
const CUT_OFF_LIMITS = { cpuSoftLimitMs: 300, cpuHardLimitMs: 800, beforeunloadCpuPct: 50 };
/** The worker as scenario 8 deploys it, with the portal's limit configured. */
const WORKER_ENV = {
  WORKER_TIME_BUDGET_MS: '140000', WORKER_ISOLATE_WALL_CLOCK_MS: '150000', WORKER_MIN_START_MS: '2000', HUBSPOT_RATE_LIMIT_PER_10S: String(LIMIT),
};

interface Item {
  content_type: Batch;
  hubspot_id: string;
  plan_status: string | null;
  outcome: string | null;
  writes: number;
  restore_outcome: string | null;
  overwritten_revision_id: string | null;
  before: Json | null;
  after: Json;
}

async function itemsOf(sql: Sql, planId: string): Promise<Item[]> {
  return (await sql`select content_type, hubspot_id, plan_status, outcome, writes, restore_outcome, overwritten_revision_id, before, after
    from public.publish_items where plan_id = ${planId} order by id`) as unknown as Item[];
}

const keyOf = (type: string, id: string) => `${type}/${id}`;

/** Worker isolates' counters now (for deltas over a phase). */
function isolateCounters(sys: LocalSystem) {
  const s = sys.functions.stats().worker!;
  return { isolates: s.isolatesStarted, hardKills: s.hardKills, beforeunload: Object.values(s.beforeunload).reduce((a, b) => a + b, 0), requests: s.requests };
}

export async function publishScenario(ctx: BenchContext): Promise<ScenarioResult> {
  const shape = ctx.quick ? QUICK : FULL;
  const full = !ctx.quick;
  const dbUrl = await migratedDatabase(ctx.pg, 's13_publish');
  const sql: Sql = connectDatabase(dbUrl, { max: 3, applicationName: 'bench-publish' });
  const pooler = await functionsPooler(ctx, dbUrl);
  const sys = await startLocalSystem(dbUrl, { sim: { rateLimit: { maxPer10s: LIMIT } }, limits: CUT_OFF_LIMITS, env: { ...WORKER_ENV, ...pooler.env } });
  try {
    const portal = await addBenchPortal(sql, sys, { hubspotPortalId: 31_300_001, name: 'Publishing portal', sizes: shape.sizes, hubdbTables: shape.hubdbTables });
    const hp = portal.hubspotPortalId;
    ctx.log(`${S}: fetching the copy of ${TYPES.join(', ')}`);
    await fetchCopy(sql, sys, portal, TYPES, shape.fetchTimeoutMs);
    const targets = new Map<string, Json>();
    for (const type of TYPES) for (const [id, patch] of await seedEdits(sql, portal, type, shape.edits[type])) targets.set(keyOf(type, id), patch);
    const edits = targets.size;

    // The plan.
    const cpu0 = { pg: await postgresCpuMs(ctx.pg.pid), worker: workerCpuMs(sys) };
    const planStart = Date.now();
    const plan = await createPublishPlan(sql, { portalId: portal.portalId, userId: portal.userId });
    ctx.log(`${S}: plan of ${plan.items} edits`);
    const planStatus = await runToEnd(sql, sys, plan.runId, shape.runTimeoutMs);
    const planEnd = Date.now();
    const cpuPlan = { pg: await postgresCpuMs(ctx.pg.pid), worker: workerCpuMs(sys) };
    const planned = await itemsOf(sql, plan.planId);
    const ready = planned.filter((i) => i.plan_status === 'ready');
    ctx.checks.equal(S, 'plan run completed', planStatus, 'completed');
    ctx.checks.equal(S, 'every edit planned ready', ready.length, edits);

    // HubSpot changes: between plan and apply (2%), just before the batch's re-read (1%), inside the window (a few pages and posts).
    const random = seeded(13);
    const byType = (t: Batch) => ready.filter((i) => i.content_type === t).map((i) => i.hubspot_id);
    const changedBefore: { type: Batch; id: string }[] = [];
    const changedDuring: { type: Batch; id: string }[] = [];
    const windowEdits: { type: Batch; id: string; field: string; value: string }[] = [];
    for (const type of TYPES) {
      const ids = byType(type);
      const chosen = pick(ids, Math.round(shape.edits[type] * (CHANGED_BEFORE_APPLY + CHANGED_DURING_APPLY)), random);
      const before = Math.round(shape.edits[type] * CHANGED_BEFORE_APPLY);
      for (const id of chosen.slice(0, before)) changedBefore.push({ type, id });
      for (const id of chosen.slice(before)) changedDuring.push({ type, id });
    }
    const taken = new Set([...changedBefore, ...changedDuring].map((c) => keyOf(c.type, c.id)));
    for (let k = 0; k < shape.windowEdits; k++) {
      const type = VERSIONED[k % VERSIONED.length]!;
      const [id] = pick(byType(type).filter((i) => !taken.has(keyOf(type, i))), 1, random);
      taken.add(keyOf(type, id!));
      windowEdits.push({ type, id: id!, field: firstField(type), value: `Window edit ${id}` });
    }
    const theirs = (id: string) => `Changed in HubSpot ${id}`;
    for (const c of changedBefore) sys.sim.editInHubSpot(hp, c.type, c.id, { [firstField(c.type)]: theirs(c.id) });

    // The apply, isolates cut off as it goes.
    const iso0 = isolateCounters(sys);
    const trace = statementTrace(ctx, sql, dbUrl, `${S}: the apply`);
    await trace?.begin();
    const applyStart = Date.now();
    const runId = await approvePublishPlan(sql, plan.planId, portal.userId);
    for (const c of changedDuring) sys.sim.editBeforeNextRead(hp, c.type, c.id, { [firstField(c.type)]: theirs(c.id) });
    for (const w of windowEdits) sys.sim.editAfterNextRead(hp, w.type, w.id, { [w.field]: w.value });
    ctx.log(`${S}: apply (publish run ${runId}); ${changedBefore.length} items changed in HubSpot since the plan, ${changedDuring.length} to change before their re-read, ${windowEdits.length} inside the window`);
    const applyStatus = await runToEnd(sql, sys, runId, shape.runTimeoutMs);
    const applyEnd = Date.now();
    const cpu1 = { pg: await postgresCpuMs(ctx.pg.pid), worker: workerCpuMs(sys) };
    const statements = await trace?.end(edits, 'edit');
    const iso1 = isolateCounters(sys);
    const applyWrites = new Map<string, number>();
    for (const type of TYPES) for (const [id, n] of Object.entries(sys.sim.writeCounts(hp, type))) applyWrites.set(keyOf(type, id), n);
    const items = await itemsOf(sql, plan.planId);
    const itemBy = new Map(items.map((i) => [keyOf(i.content_type, i.hubspot_id), i]));
    ctx.log(`${S}: apply ${applyStatus} in ${((applyEnd - applyStart) / 1000).toFixed(1)} s; worker isolates ${iso1.isolates - iso0.isolates} started, ` +
      `${iso1.beforeunload - iso0.beforeunload} beforeunload, ${iso1.hardKills - iso0.hardKills} hard kills`);

    // HubSpot now, read back over HTTP.
    const now = new Map<string, Json>();
    for (const type of TYPES) {
      const ids = [...targets.keys()].filter((k) => k.startsWith(`${type}/`)).map((k) => k.slice(type.length + 1));
      for (const [id, item] of await hubspotNow(sys.sim.url, portal, type, ids)) now.set(keyOf(type, id), item);
    }

    // Changed in HubSpot before the batch's re-read: conflicts, never written, HubSpot's value kept.
    const conflictsMade = [...changedBefore, ...changedDuring];
    const landedDuring = changedDuring.filter((c) => now.get(keyOf(c.type, c.id))?.[firstField(c.type)] === theirs(c.id));
    const conflictsDetected = conflictsMade.filter((c) => itemBy.get(keyOf(c.type, c.id))?.outcome === 'conflict').length;
    const overwrittenChanged = conflictsMade.filter((c) => (applyWrites.get(keyOf(c.type, c.id)) ?? 0) > 0
      || now.get(keyOf(c.type, c.id))?.[firstField(c.type)] !== theirs(c.id)).length;
    // Inside the window: written over (HubSpot has no precondition) and reported `overwritten` with the revision
    // to restore; or, when a cut-off came between the re-read and the write, a conflict at the retried re-read.
    const windowResults = windowEdits.map((w) => {
      const item = itemBy.get(keyOf(w.type, w.id));
      const writtenOver = (applyWrites.get(keyOf(w.type, w.id)) ?? 0) > 0;
      const detected = writtenOver ? item?.outcome === 'overwritten' && item.overwritten_revision_id !== null : item?.outcome === 'conflict';
      return { ...w, writtenOver, outcome: item?.outcome ?? null, revision: item?.overwritten_revision_id ?? null, detected };
    });
    const windowConflicts = windowResults.filter((w) => !w.writtenOver).map((w) => keyOf(w.type, w.id));
    // Every other edit: applied, with its target in HubSpot.
    const conflictKeys = new Set([...conflictsMade.map((c) => keyOf(c.type, c.id)), ...windowConflicts]);
    const withoutConflict = [...targets.keys()].filter((k) => !conflictKeys.has(k));
    const applied = withoutConflict.filter((k) => {
      const item = itemBy.get(k);
      if (item?.outcome !== 'applied' && item?.outcome !== 'overwritten') return false;
      // A window edit of another field than ours would survive; these are the same field, overwritten by our target.
      return sameJson(fieldsOf(now.get(k), targets.get(k)!), targets.get(k));
    }).length;
    const writtenTwice = [...applyWrites.values()].filter((n) => n > 1).length;
    const sentTwice = items.filter((i) => i.writes > 1).length;

    // Requests: the plan's reads, the apply's re-reads and writes, and its window check.
    const log = sys.sim.requestLog();
    const planRequests = countRequests(portalRequests(log, portal, planStart, planEnd));
    const applyEntries = portalRequests(log, portal, applyStart, applyEnd);
    const applyRequests = countRequests(applyEntries);
    const publishRequests = planRequests.read + applyRequests.read + applyRequests.write;
    const idealBatches = TYPES.reduce((n, t) => n + Math.ceil(shape.edits[t] / 100), 0);
    const spanS = applyEntries.length > 1 ? (applyEntries.at(-1)!.at - applyEntries[0]!.at) / 1000 : Number.NaN;
    const rate = applyEntries.length / spanS / (LIMIT / 10);
    const timeline = batchTimeline(applyEntries, applyStart);
    // The busiest ten seconds of the apply (HubSpot's window): how close the budget let it come to the limit.
    let busiest = 0;
    for (let i = 0, j = 0; j < applyEntries.length; j++) {
      while (applyEntries[j]!.at - applyEntries[i]!.at >= 10_000) i++;
      busiest = Math.max(busiest, j - i + 1);
    }
    const auditPages = applyEntries.filter((e) => e.purpose === 'window');
    // A window check starts at a time (`after` an ISO time); it goes on with HubSpot's cursor. A job released
    // during its check (a cut-off) checks again from the start on its next claim.
    const windowStarts = auditPages.filter((e) => /audit-logs/.test(e.path) && /^\d{4}-\d\d-\d\dT/.test(e.after ?? '')).length;
    ctx.log(`${S}: apply per type (s from approval; median ms re-read → write, write → next re-read): ` +
      Object.entries(timeline).map(([t, x]) => `${t} ${x.requests} req ${x.firstS.toFixed(1)}–${x.lastS.toFixed(1)} s, ${x.readToWriteMs} / ${x.writeToReadMs} ms`).join('; ') +
      (auditPages.length ? `; window check ${auditPages.length} req ${((auditPages[0]!.at - applyStart) / 1000).toFixed(1)}–${((auditPages.at(-1)!.at - applyStart) / 1000).toFixed(1)} s` : ''));

    // The rollback: nothing changed in HubSpot since the apply.
    // The bench's own reads leave the portal's ten-second window first (a quick run's are too few to matter).
    if (full) await sleep(10_500);
    const rollbackStart = Date.now();
    const restoreRunId = await rollbackPublishRun(sql, runId, portal.userId);
    const restoreStatus = await runToEnd(sql, sys, restoreRunId, shape.runTimeoutMs);
    const rollbackEnd = Date.now();
    const restoredItems = await itemsOf(sql, plan.planId);
    const appliedItems = restoredItems.filter((i) => i.outcome === 'applied');
    const restoreWrites = new Map<string, number>();
    for (const type of TYPES) for (const [id, n] of Object.entries(sys.sim.writeCounts(hp, type))) restoreWrites.set(keyOf(type, id), n - (applyWrites.get(keyOf(type, id)) ?? 0));
    if (full) await sleep(10_500);
    const back = new Map<string, Json>();
    for (const type of TYPES) {
      const ids = appliedItems.filter((i) => i.content_type === type).map((i) => i.hubspot_id);
      for (const [id, item] of await hubspotNow(sys.sim.url, portal, type, ids)) back.set(keyOf(type, id), item);
    }
    const restored = appliedItems.filter((i) => i.restore_outcome === 'restored'
      && sameJson(fieldsOf(back.get(keyOf(i.content_type, i.hubspot_id)), i.after), i.before)).length;
    const restoreRequests = countRequests(portalRequests(sys.sim.requestLog(), portal, rollbackStart, rollbackEnd));
    const restoredTwice = [...restoreWrites.values()].filter((n) => n > 1).length;

    // HubDB rows and redirects: a smaller sub-run on a portal of their own.
    const sub = await hubdbAndRedirects(ctx, sql, sys, shape.sub, shape.runTimeoutMs, shape.fetchTimeoutMs);
    // 429s the product's requests got (plan, apply, rollback; the bench's own paced reads between them are not the product's).
    const finalLog = sys.sim.requestLog();
    const rateLimited = [[planStart, planEnd], [applyStart, applyEnd], [rollbackStart, rollbackEnd]]
      .reduce((n, [from, to]) => n + countRequests(portalRequests(finalLog, portal, from!, to!)).rateLimited, 0) + sub.rateLimited;

    // Checks: the product's guarantees.
    ctx.checks.expect(S, 'publish run settled with its conflicts', applyStatus === 'partially_failed' || (applyStatus === 'completed' && conflictsMade.length === 0), applyStatus);
    ctx.checks.equal(S, 'every edit without a conflict applied, its target in HubSpot', applied, withoutConflict.length);
    ctx.checks.equal(S, 'every injected conflict detected', conflictsDetected, conflictsMade.length);
    ctx.checks.equal(S, 'no item changed in HubSpot before its re-read was written', overwrittenChanged, 0);
    ctx.checks.equal(S, 'every window edit detected (overwritten with its revision, or a conflict)', windowResults.filter((w) => w.detected).length, windowEdits.length);
    ctx.checks.equal(S, 'no item written twice by HubSpot', writtenTwice, 0);
    ctx.checks.equal(S, 'every edit changed during the apply landed before its re-read', landedDuring.length, changedDuring.length);
    ctx.checks.equal(S, 'restore run completed', restoreStatus, 'completed');
    ctx.checks.equal(S, 'every applied item restored, the plan\'s values back in HubSpot', restored, appliedItems.length);
    ctx.checks.equal(S, 'no item restored twice by HubSpot', restoredTwice, 0);
    // A full run is about cut-offs: the figures mean little if no isolate was cut off during the apply.
    if (full) ctx.checks.expect(S, 'worker isolates were cut off during the apply', iso1.beforeunload - iso0.beforeunload + iso1.hardKills - iso0.hardKills > 0,
      `${iso1.beforeunload - iso0.beforeunload} beforeunload, ${iso1.hardKills - iso0.hardKills} hard kills`);

    const goal = (g: (m: number) => Goal) => (full ? { goal: g } : {});
    const perEdit = (from: number | null, to: number | null) => (from === null || to === null ? Number.NaN : ((to - from) * 1000) / edits);
    const P = 'publish: ';
    const figures: Figure[] = [
      figure(S, `${P}edits`, 'count', [edits], { note: TYPES.map((t) => `${t} ${shape.edits[t].toLocaleString('en-US')}`).join(', ') }),
      figure(S, `${P}applied ÷ edits without conflict`, 'ratio', [applied / Math.max(1, withoutConflict.length)], {
        goal: atLeast(1, '1'), note: `${applied.toLocaleString('en-US')} of ${withoutConflict.length.toLocaleString('en-US')}`,
      }),
      figure(S, `${P}conflicts detected ÷ conflicts made`, 'ratio', [conflictsDetected / Math.max(1, conflictsMade.length)], {
        goal: atLeast(1, '1'), note: `${changedBefore.length} changed between plan and apply, ${changedDuring.length} during it before their batch's re-read`,
      }),
      figure(S, `${P}items overwritten that changed in HubSpot`, 'count', [overwrittenChanged], { goal: atMost(0, '0') }),
      figure(S, `${P}window overwrites detected ÷ made`, 'ratio', [windowResults.filter((w) => w.detected).length / Math.max(1, windowEdits.length)], {
        goal: atLeast(1, '1'),
        note: `${windowEdits.length} same-field edits of pages and posts between a re-read and its write: ${windowResults.filter((w) => w.writtenOver).length} written over ` +
          `and reported overwritten with the revision to restore, ${windowConflicts.length} a conflict (a cut-off before the write)`,
      }),
      figure(S, `${P}items written more than once`, 'count', [writtenTwice], { goal: atMost(0, '0'), note: `the simulator's per-item write counter; ${sentTwice} items sent twice (their first write never applied)` }),
      figure(S, `${P}HubSpot requests per 100 edits`, 'count', [(100 * publishRequests) / edits], {
        ...goal(atMost(3.1, '≤ 3.1')),
        note: `plan reads ${planRequests.read}, apply re-reads ${applyRequests.read}, writes ${applyRequests.write}; floor ${(3 * idealBatches * 100 / edits).toFixed(2)} (${idealBatches} batches)`,
      }),
      figure(S, `${P}window-check requests per 100 edits`, 'count', [(100 * applyRequests.window) / edits], {
        note: `audit-log pages and revision reads: ${JSON.stringify(Object.fromEntries(Object.entries(applyRequests.byEndpoint).filter(([e]) => /audit|revisions/.test(e))))}; ` +
          `${windowStarts} window checks started for ${VERSIONED.length} page and post jobs (one cut off mid-check starts again from its first page)`,
      }),
      figure(S, `${P}requests per second ÷ the portal's limit`, 'ratio', [rate], {
        ...goal(atLeast(0.9, '≥ 0.9')),
        note: `${applyEntries.length} requests (${applyRequests.read + applyRequests.write} re-reads and writes, ${applyRequests.window} window check) ` +
          `from the apply's first to its last, ${spanS.toFixed(1)} s, against ${LIMIT} per 10 s; the busiest 10 s ${busiest} (the shared budget grants 186 per 10.15 s: ` +
          `a steady 0.965, and a first window's burst lifts an apply this short above it)`,
      }),
      figure(S, `${P}429s`, 'count', [rateLimited], { goal: atMost(0, '0') }),
      figure(S, `${P}rollback restored ÷ applied`, 'ratio', [restored / Math.max(1, appliedItems.length)], {
        goal: atLeast(1, '1'), note: `${restored.toLocaleString('en-US')} of ${appliedItems.length.toLocaleString('en-US')} (overwritten items are left to their revision)`,
      }),
      figure(S, `${P}Postgres CPU per edit`, 'µs', [perEdit(cpu0.pg, cpu1.pg)], { note: `plan and apply: the plan ${perEdit(cpu0.pg, cpuPlan.pg).toFixed(0)}, the apply ${perEdit(cpuPlan.pg, cpu1.pg).toFixed(0)}` }),
      figure(S, `${P}worker CPU per edit`, 'µs', [perEdit(cpu0.worker, cpu1.worker)], {
        note: `plan and apply: the plan ${perEdit(cpu0.worker, cpuPlan.worker).toFixed(0)}, the apply ${perEdit(cpuPlan.worker, cpu1.worker).toFixed(0)}, isolate starts after cut-offs included`,
      }),
      ...sub.figures,
    ];
    ctx.note(`${S}: ${edits.toLocaleString('en-US')} edits of the scenario-8 portal (${JSON.stringify(shape.sizes)}, ${shape.hubdbTables} HubDB tables), its copy fetched by the worker first. ` +
      `Plan ${((planEnd - planStart) / 1000).toFixed(1)} s, apply ${((applyEnd - applyStart) / 1000).toFixed(1)} s (approval to settled), rollback ${((rollbackEnd - rollbackStart) / 1000).toFixed(1)} s. ` +
      `Worker isolates under CPU limits ${JSON.stringify(CUT_OFF_LIMITS)} (the worker's own CPU budget the hosted 1,500 ms): during the apply ${iso1.isolates - iso0.isolates} isolates started, ` +
      `${iso1.beforeunload - iso0.beforeunload} cut off (beforeunload), ${iso1.hardKills - iso0.hardKills} hard kills; ` +
      `the batches (re-read, write) per type, s from approval: ${Object.entries(timeline).map(([t, x]) => `${t} ${x.firstS.toFixed(1)}–${x.lastS.toFixed(1)}`).join(', ')}` +
      `${auditPages.length ? `, the window checks ${((auditPages[0]!.at - applyStart) / 1000).toFixed(1)}–${((auditPages.at(-1)!.at - applyStart) / 1000).toFixed(1)}` : ''}; apply requests by endpoint ${JSON.stringify(applyRequests.byEndpoint)}; ` +
      `rollback requests ${JSON.stringify(restoreRequests.byEndpoint)}. Window edits: ${JSON.stringify(windowResults.map((w) => [w.type, w.outcome, w.revision !== null]))}. ` +
      `CPU: Postgres (postmaster and backends, /proc) and the worker isolates from the plan's creation to the publish run's end. The functions reach Postgres ${pooler.via}.`);
    return {
      figures,
      details: {
        shape, edits, timeline, windowStarts, busiest10s: busiest, plan: { seconds: (planEnd - planStart) / 1000, requests: planRequests }, apply: { seconds: (applyEnd - applyStart) / 1000, requests: applyRequests, spanS, status: applyStatus },
        rollback: { seconds: (rollbackEnd - rollbackStart) / 1000, requests: restoreRequests, status: restoreStatus },
        isolates: { before: iso0, after: iso1 }, windowResults, statements,
        cpuMs: {
          plan: { postgres: cpu0.pg === null || cpuPlan.pg === null ? null : cpuPlan.pg - cpu0.pg, worker: cpuPlan.worker - cpu0.worker },
          apply: { postgres: cpuPlan.pg === null || cpu1.pg === null ? null : cpu1.pg - cpuPlan.pg, worker: cpu1.worker - cpuPlan.worker },
        },
        sub: sub.details, rateLimited, rate: round(rate, 3),
      },
    };
  } finally {
    await sql.end({ timeout: 5 });
    await sys.stop();
    await pooler.stop();
  }
}
