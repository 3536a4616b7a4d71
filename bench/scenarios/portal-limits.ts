// Scenario 10: each portal's own HubSpot limits. Four portals fetched at once
// with no configuration (no HUBSPOT_RATE_LIMIT_PER_10S): a Starter private app
// (100 / 10 s), a Professional private app (190), an OAuth install (110) and a
// Professional private app whose account another app spends 40% of (114 left).
// Per portal kind: requests/s ÷ what HubSpot leaves that portal, and 429s.
// Window = whole 10 s intervals from each portal's first request.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { CONTENT_TYPES } from '../../shared/content-types.ts';
import { connectDatabase } from '../../shared/db.ts';
import { hubspotPortalLimits } from '../../shared/sql/budget.ts';
import { postOAuthToken } from '../../shared/hubspot/oauth-http.ts';
import { connectOAuthPortal, connectPrivateAppPortal } from '../../shared/hubspot/portal-connect.ts';
import { silentLogger } from '../../shared/log.ts';
import { createRun, stopRun } from '../../shared/sql/runs.ts';
import { localDirectorySink } from '../../functions/worker/local-sink.ts';
import { runWorkerInvocation } from '../../functions/worker/invocation.ts';
import { hubspotDeps } from '../../functions/orchestrator/hubspot-deps.ts';
import { startHubSpotSimulator, type HubSpotSimulator, type PortalOptions } from '../../hubspot-sim/server.ts';
import { testTokenKeys } from '../../local/test-token-keys.ts';
import type { BenchContext, ScenarioResult } from '../lib/context.ts';
import { cloneDatabase, dropDatabase, migratedDatabase } from '../lib/pg.ts';
import { atLeast, atMost, figure } from '../lib/report.ts';
import { benchIds, seedUsersAndPortals } from '../lib/seed.ts';
import { setTimeout as sleep } from 'node:timers/promises';

const S = '10';
const INTERVAL_MS = 10_000;
const INVOCATIONS = 4;
const LANES = 6;
const APP = { clientId: 'bench-limits-app', clientSecret: 'bench-limits-secret' };
const REDIRECT = 'https://bench.example.test/oauth/callback';

// Enough that even the Professional portal (18.3 requests/s granted) pages for the whole window: 720 pages each.
const FULL_SIZES = { site_pages: 12_000, landing_pages: 12_000, blog_posts: 12_000, blog_authors: 12_000, blog_tags: 12_000, url_redirects: 12_000, hubdb_rows: 0 };
const QUICK_SIZES = { site_pages: 300, landing_pages: 120, blog_posts: 400, blog_authors: 25, blog_tags: 60, url_redirects: 150, hubdb_rows: 0 };

interface Kind {
  key: string;
  label: string;
  auth: 'private_app' | 'oauth';
  portal: Omit<PortalOptions, 'portalId' | 'token' | 'sizes'>;
}

const KINDS: Kind[] = [
  { key: 'starter', label: 'Starter private app', auth: 'private_app', portal: { tier: 'starter' } },
  { key: 'professional', label: 'Professional private app', auth: 'private_app', portal: { tier: 'professional' } },
  { key: 'oauth', label: 'OAuth install', auth: 'oauth', portal: { tier: 'starter' } },
  { key: 'shared', label: 'Professional private app, another app at 40%', auth: 'private_app', portal: { tier: 'professional', otherAppsShare: 0.4 } },
];

interface KindRep {
  available: number;
  requests: number;
  rate: number;
  rateLimited: number;
  learnedMax: number | null;
}

export async function portalLimits(ctx: BenchContext): Promise<ScenarioResult> {
  const periods = ctx.quick ? 0 : 3; // 0: the whole (small) run
  const tpl = await migratedDatabase(ctx.pg, 's10_tpl');
  const exportDir = await mkdtemp(path.join(tmpdir(), 'queue-bench-s10-'));
  const reps: Record<string, KindRep>[] = [];
  try {
    for (let rep = 0; rep < ctx.reps; rep++) {
      const url = await cloneDatabase(ctx.pg, tpl, 's10_run');
      const sim = await startHubSpotSimulator();
      try {
        sim.registerApp({ ...APP, redirectUris: [REDIRECT] });
        const r = await limitsRep(ctx, sim, url, periods, exportDir);
        reps.push(r);
        ctx.log(`[10] rep ${rep + 1}/${ctx.reps}: ` + KINDS.map((k) => `${k.key} ${r[k.key]!.rate.toFixed(3)} (${r[k.key]!.rateLimited} × 429)`).join(', '));
      } finally {
        await sim.close();
        await dropDatabase(ctx.pg, url);
      }
    }
  } finally {
    await dropDatabase(ctx.pg, tpl);
    await rm(exportDir, { recursive: true, force: true });
  }
  const full = !ctx.quick;
  ctx.note(`Scenario 10: four portals fetched at once (${JSON.stringify(full ? FULL_SIZES : QUICK_SIZES)} each), ${INVOCATIONS} in-process ` +
    `runWorkerInvocation calls × ${LANES} lanes, no HUBSPOT_RATE_LIMIT_PER_10S: every limit is learned from the simulator's headers. ` +
    'Rate = requests/s in whole 10 s intervals from the portal\'s first request ÷ what HubSpot leaves the portal per second (its limit, less the other app\'s 40%). ' +
    (full ? `Window: ${periods} intervals, then the runs are stopped.` : 'Quick mode: the whole small run, inside the first interval, so the rates are not meaningful.'));
  const figures = KINDS.flatMap((k) => [
    figure(S, `${k.label}: requests/s ÷ its real limit`, 'ratio', reps.map((r) => r[k.key]!.rate), { goal: full ? atLeast(0.9, '≥ 0.9') : undefined }),
    figure(S, `${k.label}: simulator 429 responses`, 'count', reps.map((r) => r[k.key]!.rateLimited), { goal: atMost(0, '0') }),
  ]);
  return { figures, details: { intervalMs: INTERVAL_MS, periods, invocations: INVOCATIONS, lanes: LANES, sizes: full ? FULL_SIZES : QUICK_SIZES, reps } };
}

async function limitsRep(ctx: BenchContext, sim: HubSpotSimulator, url: string, periods: number, exportDir: string): Promise<Record<string, KindRep>> {
  const sql = connectDatabase(url, { max: INVOCATIONS * 3, applicationName: 'bench-limits' });
  try {
    await seedUsersAndPortals(sql, 1, KINDS.length);
    const portals = await Promise.all(KINDS.map(async (k, n) => {
      const ids = benchIds(n + 1);
      const sizes = ctx.quick ? QUICK_SIZES : FULL_SIZES;
      if (k.auth === 'private_app') {
        const token = `pat-bench-limits-${n}-${crypto.randomUUID()}`;
        sim.addPortal({ ...k.portal, portalId: ids.hubspotPortalId, token, sizes, hubdbTables: 0 });
        await connectPrivateAppPortal(sql, testTokenKeys, { ownerId: ids.userId, hubspotPortalId: ids.hubspotPortalId, name: k.label, accessToken: token });
      } else {
        sim.addPortal({ ...k.portal, portalId: ids.hubspotPortalId, token: `pat-unused-${crypto.randomUUID()}`, sizes, hubdbTables: 0 });
        sim.queueInstall({ portalId: ids.hubspotPortalId, grant: 'approve' });
        const authorize = new URL(`${sim.url}/oauth/authorize`);
        authorize.search = new URLSearchParams({ client_id: APP.clientId, redirect_uri: REDIRECT, scope: 'content hubdb', state: 's' }).toString();
        const code = (await sim.authorize(authorize.toString())).searchParams.get('code')!;
        const grant = await postOAuthToken({ basePath: sim.url }, {
          grant_type: 'authorization_code', client_id: APP.clientId, client_secret: APP.clientSecret, redirect_uri: REDIRECT, code,
        });
        await connectOAuthPortal(sql, testTokenKeys, {
          ownerId: ids.userId, hubspotPortalId: ids.hubspotPortalId, name: k.label, accessToken: grant.accessToken,
          refreshToken: grant.refreshToken!, expiresInSeconds: grant.expiresIn, requestedAt: grant.requestedAt, scopes: grant.scopes,
        });
      }
      return { kind: k, ids };
    }));
    // As the orchestrator creates a run: HubSpot's limit=1 totals first, whose answers teach each portal's budget its limit.
    const types = CONTENT_TYPES.filter((t) => !t.startsWith('hubdb'));
    const hubspot = hubspotDeps({ sql, basePath: sim.url, rateLimit: {}, tokenKeys: testTokenKeys, oauthApp: APP });
    const totals = await Promise.all(portals.map(async ({ ids }) => {
      const tokens = (await hubspot.portalTokens(ids.portalId))!;
      const client = hubspot.hubspotClient({ tokens }, tokens.hubspotPortalId, tokens.authKind);
      return Promise.all(types.map((t) => client.countTotal(t)));
    }));
    sim.resetStats();
    const runs = await Promise.all(portals.map(({ ids }, n) =>
      createRun(sql, { portalId: ids.portalId, requestedBy: ids.userId, kind: 'fetch', contentTypes: types, totals: totals[n]! })));
    const runtime = {
      sql, log: silentLogger, exportSink: localDirectorySink(exportDir), tokenKeys: testTokenKeys, oauthApp: APP,
      settings: { budgetMs: 120_000, lanes: LANES, minStartMs: 1_000, hubspotBasePath: sim.url, rateLimit: {} },
    };
    const invocations = Promise.all(Array.from({ length: INVOCATIONS }, (_, k) => runWorkerInvocation(runtime, `bench-limits-${k}`)));
    if (periods > 0) {
      while (sim.requestLog().length === 0) await sleep(20);
      const t0 = Math.min(...sim.requestLog().map((e) => e.at));
      await sleep(Math.max(0, t0 + periods * INTERVAL_MS + 1_000 - Date.now()));
      for (const r of runs) await stopRun(sql, r.runId!);
    }
    const summaries = await invocations;
    ctx.checks.equal(S, 'no fetch job failed or was retried', summaries.reduce((n, s) => n + s.failed + s.retried, 0), 0);
    const stats = sim.stats();
    const learned = await hubspotPortalLimits(sql, portals.map(({ ids }) => ids.hubspotPortalId));
    const out: Record<string, KindRep> = {};
    for (const { kind, ids } of portals) {
      const real = sim.limitsOf(ids.hubspotPortalId, kind.auth);
      const available = Math.round(real.maxPerWindow * (1 - real.otherAppsShare));
      const log = sim.requestLog().filter((e) => e.portalId === ids.hubspotPortalId && e.status !== 0);
      const tStart = Math.min(...log.map((e) => e.at));
      const windowMs = periods > 0 ? periods * INTERVAL_MS : Math.max(1, Math.max(...log.map((e) => e.at)) + 1 - tStart);
      const requests = log.filter((e) => e.at >= tStart && e.at < tStart + windowMs).length;
      const learnedMax = learned.get(String(ids.hubspotPortalId))?.maxPerInterval ?? null;
      ctx.checks.equal(S, `${kind.label}: the learned limit is the simulator's`, learnedMax, real.maxPerWindow);
      out[kind.key] = {
        available, requests, rate: (requests / windowMs) / (available / INTERVAL_MS),
        rateLimited: stats.rateLimitedByPortal[ids.hubspotPortalId] ?? 0, learnedMax,
      };
    }
    return out;
  } finally {
    await sql.end({ timeout: 5 });
  }
}
