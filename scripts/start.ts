// npm start: the whole system on this machine, on embedded defaults. Starts
// Postgres (data in .local/), the HubSpot simulator with a realistic portal and
// both edge functions under real Deno; signs in a demo user, connects the
// portal (a private app token, or with --oauth the HubSpot OAuth install
// flow; the user signs in through the local Auth at /auth/v1) and triggers a fetch through the orchestrator over HTTP;
// runs the schema's cron jobs (local/cron/cron.ts) and several concurrent worker invocations; shows live progress; exports
// everything; prints a summary.
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { connectDatabase } from '../shared/db.ts';
import { REALISTIC_PORTAL_SIZES, SMALL_PORTAL_SIZES, startHubSpotSimulator, type HubSpotSimulator } from '../hubspot-sim/server.ts';
import { startDevDatabase } from './lib/dev-database.ts';
import { freePort, PROJECT_ROOT } from '../local/postgres.ts';
import { startLocalAuth } from '../local/auth/auth.ts';
import { createSigningKeys, startLocalFunctions, summarizeEdgeStats } from '../local/supabase.ts';
import { startLocalCron } from '../local/cron/cron.ts';
import { installThroughSimulator, localTokenKeys, registerLocalOAuthApp } from '../local/system.ts';
import { createProgressView, type JobProgress } from './lib/progress-view.ts';
import { startWebServer } from '../local/web-server.ts';
import { localExportPath } from '../shared/export-location.ts';

const HELP = `Usage: npm start -- [options]

Runs the queue end to end on this machine: embedded Postgres, a simulated
HubSpot portal, the orchestrator and worker under Deno, and the schema's
pg_cron jobs run locally on their schedules (sync schedules fire).

Options:
  --size small|realistic   simulated portal size (default realistic: ~42k items)
  --workers N              concurrent worker invocations per cron tick (default 4)
  --budget-ms N            wall-clock budget of one worker invocation (default 20000)
  --chaos                  kill the worker process and inject HubSpot faults at random
  --plan free|paid         edge limits to enforce: wall clock per isolate 150 s
                           (free, default) or 400 s (paid); 2 s CPU, 256 MB
  --oauth                  connect the portal with HubSpot OAuth (the install flow
                           through the orchestrator: authorize URL, the simulator
                           approves, redirect, complete) instead of a private app
                           token; access tokens expire during the fetch
  --token-ttl N            with --oauth: access token lifetime in seconds (default 10;
                           HubSpot's is 1800)
  --serve                  keep everything running afterwards and print the URLs
  --port N                 the local SUPABASE_URL's port (default: a free one each run)
  --plain                  plain progress lines even on a terminal
  -h, --help               this help

Real mode: with HUBSPOT_TOKEN set, the portal behind that token is fetched from
HubSpot (HUBSPOT_BASE_URL to override) instead of the simulator.
DATABASE_URL: use that Postgres server instead of the embedded one.`;

const { values: args } = parseArgs({
  options: {
    size: { type: 'string', default: 'realistic' },
    workers: { type: 'string', default: '4' },
    'budget-ms': { type: 'string', default: '20000' },
    chaos: { type: 'boolean', default: false },
    serve: { type: 'boolean', default: false },
    plan: { type: 'string', default: 'free' },
    plain: { type: 'boolean', default: false },
    oauth: { type: 'boolean', default: false },
    'token-ttl': { type: 'string', default: '10' },
    port: { type: 'string' },
    help: { type: 'boolean', short: 'h', default: false },
  },
});
if (args.help) {
  console.log(HELP);
  process.exit(0);
}
if (args.size !== 'small' && args.size !== 'realistic') fail(`--size must be small or realistic, got "${args.size}"`);
if (args.plan !== 'free' && args.plan !== 'paid') fail(`--plan must be free or paid, got "${args.plan}"`);
const workers = Number(args.workers);
if (!Number.isInteger(workers) || workers < 1 || workers > 32) fail('--workers must be a whole number from 1 to 32');
const budgetMs = Number(args['budget-ms']);
if (!Number.isInteger(budgetMs) || budgetMs < 5000) fail('--budget-ms must be at least 5000');
const tokenTtl = Number(args['token-ttl']);
if (!Number.isInteger(tokenTtl) || tokenTtl < 5 || tokenTtl > 86_400) fail('--token-ttl must be a whole number of seconds from 5 to 86400');
const gatewayPort = args.port === undefined ? undefined : Number(args.port);
if (gatewayPort !== undefined && (!Number.isInteger(gatewayPort) || gatewayPort < 1024 || gatewayPort > 65_535)) fail('--port must be a whole number from 1024 to 65535');
if (args.oauth && process.env.HUBSPOT_TOKEN) fail('--oauth runs against the simulator: unset HUBSPOT_TOKEN');

function fail(message: string): never {
  console.error(`npm start: ${message}`);
  process.exit(2);
}

const LIMIT_PER_10S = 190;
const DEMO_HUB_ID = 24_000_001;
const realToken = process.env.HUBSPOT_TOKEN;
const started = Date.now();
const cleanups: (() => Promise<unknown>)[] = [];
let stopping = false;
async function shutdown(code: number): Promise<never> {
  if (!stopping) {
    stopping = true;
    for (const c of cleanups.reverse()) await c().catch(() => {});
  }
  process.exit(code);
}
process.on('SIGINT', () => {
  console.log('\nStopping (Postgres, simulator, functions)...');
  void shutdown(130);
});
process.on('SIGTERM', () => void shutdown(143));

const say = (m: string) => console.log(`▸ ${m}`);

say('Starting Postgres and applying migrations with the Supabase CLI...');
const db = await startDevDatabase({ fresh: true });
cleanups.push(() => db.stop());
const sql = connectDatabase(db.url, { max: 3 });
cleanups.push(() => sql.end({ timeout: 2 }));

let sim: HubSpotSimulator | null = null;
const hubspotToken = realToken ?? `pat-demo-${randomUUID()}`;
if (!realToken) {
  say(`Starting the HubSpot simulator with a ${args.size} portal...`);
  sim = await startHubSpotSimulator({ rateLimit: { maxPer10s: LIMIT_PER_10S } });
  sim.addPortal({ portalId: DEMO_HUB_ID, token: hubspotToken, sizes: args.size === 'small' ? SMALL_PORTAL_SIZES : REALISTIC_PORTAL_SIZES });
  cleanups.push(() => sim!.close());
} else say('Real mode: fetching the HubSpot portal behind HUBSPOT_TOKEN.');
// --oauth: a HubSpot app registered in the simulator, given to both functions as their secrets.
// With --serve its redirect URL is the progress page, whose "Connect with HubSpot" finishes installs
// (the simulator's authorize page approves them for the demo portal).
const pagePort = args.serve ? await freePort() : undefined;
const oauth = args.oauth && sim
  ? registerLocalOAuthApp(sim, { accessTokenTtlSeconds: tokenTtl, redirectUri: pagePort ? `http://127.0.0.1:${pagePort}/` : undefined })
  : null;
if (oauth && args.serve) sim!.setAutoInstall({ portalId: DEMO_HUB_ID, grant: 'approve' });

say(`Starting the orchestrator and worker under the local edge runtime (hosted limits, ${args.plan} plan), and the local Auth...`);
const keys = await createSigningKeys();
const supabasePort = gatewayPort ?? (await freePort());
// Auth (sign-up, sign-in, refresh, sign-out) behind the gateway's /auth/v1, signing with the project's keys.
const auth = await startLocalAuth({ sql, keys, publicUrl: `http://127.0.0.1:${supabasePort}` });
cleanups.push(() => auth.close());
const workerSecret = `wsk_${randomUUID().replaceAll('-', '')}`;
const exportDir = path.join(PROJECT_ROOT, '.local/exports');
const functions = await startLocalFunctions({
  names: ['orchestrator', 'worker'],
  port: supabasePort,
  upstreams: { '/auth/v1': auth.url },
  jwks: keys.jwks,
  limits: { plan: args.plan as 'free' | 'paid' },
  env: {
    SUPABASE_DB_URL: db.url,
    WORKER_SECRET: workerSecret,
    EXPORT_DIR: exportDir,
    // Signs local export links (result.url), as Storage signs them when deployed.
    EXPORT_URL_KEY: randomUUID(),
    WORKER_TIME_BUDGET_MS: String(budgetMs),
    WORKER_ISOLATE_WALL_CLOCK_MS: args.plan === 'paid' ? '400000' : '150000',
    WORKER_LANES: '1',
    WORKER_MIN_START_MS: '2000',
    HUBSPOT_RATE_LIMIT_PER_10S: String(LIMIT_PER_10S),
    // Tokens are stored encrypted with this run's own key.
    HUBSPOT_TOKEN_KEYS: localTokenKeys(),
    ...oauth?.env,
    ...(sim ? { HUBSPOT_BASE_URL: sim.url } : process.env.HUBSPOT_BASE_URL ? { HUBSPOT_BASE_URL: process.env.HUBSPOT_BASE_URL } : {}),
  },
  // Realtime's postgres_changes for the page; a DATABASE_URL server without wal_level=logical leaves it unserved.
  realtime: { dbUrl: db.url, required: false },
});
if (functions.realtimeUnavailable) say(`Realtime is not served: ${functions.realtimeUnavailable}`);
cleanups.push(() => functions.stop());

// The schema's pg_cron jobs, run locally on their schedules: due sync schedules and the worker POST every
// minute, retention and OAuth-state pruning (pg_cron and pg_net are not in embedded Postgres).
const localCron = await startLocalCron(db.url, { projectUrl: functions.url, workerSecret, log: (l) => say(l) });
cleanups.push(() => localCron.stop());
say(`Local cron: ${localCron.jobs().map((j) => `${j.jobname} (${j.schedule})`).join(', ')}.`);

// The demo user, an operator too (app_metadata.queue_operator, so the progress page shows
// queue_stats), signed in through the local Auth as any app signs in.
const DEMO_EMAIL = 'demo@example.test';
const demoPassword = `demo-${randomUUID().slice(0, 8)}`;
await auth.createUser({ email: DEMO_EMAIL, password: demoPassword, appMetadata: { queue_operator: true } });
const signInRes = await fetch(`${functions.url}/auth/v1/token?grant_type=password`, {
  method: 'POST',
  headers: { apikey: keys.anonKey, 'Content-Type': 'application/json' },
  body: JSON.stringify({ email: DEMO_EMAIL, password: demoPassword }),
});
if (!signInRes.ok) fail(`signing the demo user in failed: HTTP ${signInRes.status} ${await signInRes.text()}`);
const userJwt = ((await signInRes.json()) as { access_token: string }).access_token;
const orchestratorUrl = functions.functionUrl('orchestrator');
async function orchestrator(body: unknown): Promise<{ status: number; body: Record<string, any> }> {
  const res = await fetch(orchestratorUrl, { method: 'POST', headers: { Authorization: `Bearer ${userJwt}`, 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
  return { status: res.status, body: (await res.json()) as Record<string, any> };
}

let connected: { status: number; body: Record<string, any> };
if (oauth) {
  say(`Installing the HubSpot app in the portal (OAuth): start -> authorize page (the simulator approves) -> redirect -> complete...`);
  connected = await installThroughSimulator({ sim: sim!, orchestratorUrl, userJwt, hubspotPortalId: DEMO_HUB_ID, name: 'Demo portal' });
  if (connected.status === 201) {
    say(`Installed: HubSpot portal ${connected.body.hubspotPortalId} connected (tokens stored encrypted; access tokens live ${tokenTtl} s, so the fetch refreshes them).`);
  }
} else {
  say('Connecting the portal through the orchestrator...');
  connected = await orchestrator({ action: 'connect_portal', name: 'Demo portal', accessToken: hubspotToken });
}
if (connected.status !== 201) {
  console.error(`Connecting the portal failed: HTTP ${connected.status} ${JSON.stringify(connected.body)}`);
  await shutdown(1);
}
const portalId = connected.body.portalId as string;

// The demo's own drive, on top of the local cron's minutely tick: `workers` concurrent invocation loops,
// for the demo's fetch and export only. Afterwards (--serve) the worker is woken as on a hosted project:
// by the local cron (each minute, and every 10 s while work is due and none runs), by the orchestrator
// when a run is created, and by itself while work is left; never by a loop.
const summaries = { invocations: 0, claimed: 0, retried: 0, released: 0, lost: 0, failedCalls: 0 };
let driveOn = true;
async function driveLoop() {
  while (driveOn) {
    try {
      const res = await fetch(functions.functionUrl('worker'), { method: 'POST', headers: { Authorization: `Bearer ${workerSecret}` }, body: '{"source":"npm-start"}' });
      const s = (await res.json()) as Record<string, number>;
      if (res.ok) {
        summaries.invocations++;
        summaries.claimed += s.claimed ?? 0;
        summaries.retried += s.retried ?? 0;
        summaries.released += s.released ?? 0;
        summaries.lost += s.lost ?? 0;
      } else summaries.failedCalls++;
    } catch {
      summaries.failedCalls++;
    }
    await new Promise((r) => setTimeout(r, 500));
  }
}
const driveLoops = Array.from({ length: workers }, () => driveLoop());

// Chaos: kill the worker process now and then, and make HubSpot misbehave.
let kills = 0;
let chaosTimer: NodeJS.Timeout | undefined;
if (args.chaos) {
  sim?.setFaults({ errorRate: 0.03, dropRate: 0.01, slowRate: 0.05, slowMs: 1500 });
  chaosTimer = setInterval(() => {
    if (Math.random() < 0.4) return;
    kills++;
    void functions.restart('worker', 'SIGKILL');
  }, 8000);
}

const requestSamples: { t: number; n: number }[] = [];
function requestsLast10s(): number | null {
  if (!sim) return null;
  const now = Date.now();
  requestSamples.push({ t: now, n: sim.stats().requests });
  while (requestSamples.length > 1 && requestSamples[0]!.t < now - 10_000) requestSamples.shift();
  return requestSamples[requestSamples.length - 1]!.n - requestSamples[0]!.n;
}

async function runToEnd(title: string, body: Record<string, unknown>): Promise<{ runId: string; status: string; ms: number }> {
  const t0 = Date.now();
  const created = await orchestrator(body);
  if (created.status !== 201) {
    console.error(`${title}: the orchestrator answered HTTP ${created.status} ${JSON.stringify(created.body)}`);
    await shutdown(1);
  }
  const runId = created.body.runId as string;
  // Chaos kills workers mid-job: short leases so reclaims happen within the demo,
  // and more attempts, since every kill costs the job in flight one.
  if (args.chaos) await sql`update public.jobs set lease_seconds = 10, max_attempts = 10 where run_id = ${runId}`;
  const view = createProgressView(title, { interactive: !args.plain && Boolean(process.stdout.isTTY) });
  for (;;) {
    const [run] = await sql`select status, finished_at from public.runs where id = ${runId}`;
    const jobs = await sql`select id::text, content_type, status, progress_done, progress_total, attempts from public.jobs where run_id = ${runId} order by id`;
    const progress: JobProgress[] = jobs.map((j) => ({ id: j.id, contentType: j.content_type, status: j.status, done: j.progress_done, total: j.progress_total, attempts: j.attempts }));
    view.update(progress, { runStatus: run!.status, requestsPer10s: requestsLast10s(), limitPer10s: LIMIT_PER_10S, extra: args.chaos ? `worker kills ${kills}` : undefined });
    if (run!.finished_at) {
      view.stop();
      return { runId, status: run!.status, ms: Date.now() - t0 };
    }
    await new Promise((r) => setTimeout(r, 500));
  }
}

say(`Triggering a fetch of all eight content types (${workers} concurrent worker invocations, budget ${budgetMs} ms each)...`);
const fetchRun = await runToEnd('fetch', { portalId });
if (chaosTimer) clearInterval(chaosTimer);
sim?.clearFaults();
say(`Fetch run ${fetchRun.runId} ended: ${fetchRun.status} in ${(fetchRun.ms / 1000).toFixed(1)} s.`);

say('Exporting everything fetched to CSV...');
const exportRun = await runToEnd('export', { portalId, kind: 'export' });
say(`Export run ${exportRun.runId} ended: ${exportRun.status} in ${(exportRun.ms / 1000).toFixed(1)} s.`);
const files = await sql`select content_type, result from public.jobs where run_id = ${exportRun.runId} order by content_type`;
for (const f of files) {
  const where = f.result?.location ? localExportPath(exportDir, f.result.location) : '(no file)';
  console.log(`  ${String(f.content_type).padEnd(14)} ${where} (${f.result?.rows ?? 0} rows)`);
}

// Summary.
const perType = await sql`
  select j.content_type, j.attempts, j.status, coalesce((j.result ->> 'fetched')::int, 0) as fetched,
         (select count(*)::int from public.hubspot_content c where c.portal_id = j.portal_id and c.content_type = j.content_type and c.deleted_at is null) as stored
    from public.jobs j where j.run_id = ${fetchRun.runId} order by j.content_type`;
const stats = sim?.stats();
// Attempts count claims; releases, parks and retries give theirs back. What is left beyond one
// per job is a reclaim after a lease expired (a killed worker).
const [attemptRow] = await sql`select coalesce(sum(attempts), 0)::int as attempts, count(*)::int as jobs from public.jobs
  where run_id in (${fetchRun.runId}, ${exportRun.runId})`;
const reclaims = Math.max(0, attemptRow!.attempts - attemptRow!.jobs);
console.log('\n| content type | status | items stored | attempts |');
console.log('|---|---|---:|---:|');
for (const r of perType) console.log(`| ${r.content_type} | ${r.status} | ${r.stored} | ${r.attempts} |`);
console.log('\n| figure | value |');
console.log('|---|---:|');
const rows: [string, string | number][] = [
  ['items stored', perType.reduce((s, r) => s + Number(r.stored), 0)],
  ['HubSpot requests', stats?.requests ?? 'n/a (real HubSpot)'],
  ['HubSpot 429s', stats?.rateLimited ?? 'n/a'],
  ['peak requests in any 10 s', stats ? `${stats.peakPer10s} (limit ${LIMIT_PER_10S})` : 'n/a'],
  ['worker invocations', summaries.invocations],
  ['retries (retryable failures)', summaries.retried],
  ['releases (budget ran out mid-job)', summaries.released],
  ['reclaims (lease expired, e.g. killed worker)', reclaims],
  ['worker process kills (chaos)', kills],
  ...(oauth && stats
    ? ([
        ['OAuth code exchanges', stats.codeExchanges],
        [`OAuth token refreshes (access tokens live ${tokenTtl} s)`, stats.tokenRefreshes],
        ['CMS requests with an expired token (each answered 401, refreshed, retried)', stats.expiredTokenRequests],
      ] as [string, number][])
    : []),
  ['duration', `${((Date.now() - started) / 1000).toFixed(1)} s`],
];
for (const [k, v] of rows) console.log(`| ${k} | ${v} |`);
console.log('\nEdge runtime (limits enforced per isolate):');
for (const line of summarizeEdgeStats(functions.stats())) console.log(`  ${line}`);

const ok = fetchRun.status === 'completed' && exportRun.status === 'completed';
driveOn = false;
await Promise.all(driveLoops);
if (args.serve) {
  // The progress page (web/): it signs in through the local Auth; it is given no token of any kind.
  const page = await startWebServer(
    { supabaseUrl: functions.url, anonKey: keys.anonKey, realtime: Boolean(functions.realtime), demoPortal: realToken ? undefined : { name: 'Demo portal' } },
    pagePort,
  );
  cleanups.push(() => page.close());
  console.log(`\nServing (Ctrl-C stops everything):
  progress page     ${page.url}
                    (its #pageKey is this start's secret: the page needs it; open it in a second window for a second user)
  sign in           ${DEMO_EMAIL} / ${demoPassword} (the demo user, an operator), or sign up any email on the page
  SUPABASE_URL      ${functions.url}${gatewayPort ? '' : ' (a free port each run; fix it with --port N)'}
  SUPABASE_ANON_KEY ${keys.anonKey} (the local project's anon key: Auth and Realtime check it, the orchestrator does not)
  auth              ${functions.url}/auth/v1 (sign-up, password sign-in, refresh, user, sign-out; users in auth.users)
  realtime          ${functions.realtime ? `${functions.url.replace('http', 'ws')}/realtime/v1/websocket (postgres_changes on runs and jobs)` : `not served (${functions.realtimeUnavailable})`}
  orchestrator      ${orchestratorUrl}
  worker            ${functions.functionUrl('worker')} (woken as hosted: the local cron each minute and every 10 s while work is due, the orchestrator on a new run)
  worker secret     ${workerSecret} (generated for this local run only)
  database          ${db.url}
  HubSpot simulator ${sim?.url ?? '(real HubSpot)'}
  an access token   curl -s -X POST '${functions.url}/auth/v1/token?grant_type=password' -H 'apikey: ${keys.anonKey}' -d '{"email":"${DEMO_EMAIL}","password":"${demoPassword}"}'
                    (its access_token lives one hour; supabase-js refreshes it with the refresh_token)
  portal id         ${portalId}${realToken ? '' : `
  HubSpot token     ${hubspotToken} (the simulator's private-app token: connect_portal accepts it)`}`);
  await new Promise(() => {});
}
if (!ok) {
  console.error(`\nThe ${fetchRun.status !== 'completed' ? 'fetch' : 'export'} run did not complete (fetch: ${fetchRun.status}, export: ${exportRun.status}). See the table above and the jobs' last_error.`);
}
await shutdown(ok ? 0 : 1);
