// The progress page: ES modules, no build step, no dependencies locally. It
// talks to the orchestrator function only (plain fetch with the user's access
// token); with an anon key (deployed, or `npm start -- --serve` and its local
// Realtime stand-in) it also loads supabase-js (signing in, and realtime
// postgres_changes on the portal's runs and jobs). Two views: Sync (for the
// people syncing their portal) and Operator (queue_stats, for the team that
// runs the queue). One refresh loop feeds both, and it runs again after every
// action, so the views never show different moments. What a status means and
// what people read is decided in status.js only.

import { lineChart, legend } from './charts.js';
import { signIn } from './sign-in.js';
import {
  ago, duration, elapsedOf, errorMessage, isTerminal, itemsOf, jobErrorMessage, jobView, pagesOf, plural, rateAndEta, runName,
  runView, STOP_REASONS, throughputSeries, totalOf, typeLabel, TYPE_LABELS, when,
} from './status.js';

const SUPABASE_JS = 'https://esm.sh/@supabase/supabase-js@2.109.0'; // the version package.json pins
const POLL_MS_LOCAL = 1000;
const POLL_MS_REALTIME = 15000; // a safety net next to realtime
const RUNS_PAGE = 10;

const $ = (id) => document.getElementById(id);
const state = {
  cfg: null, // see loadConfig
  supabase: null, // supabase-js client (deployed only)
  token: null,
  portals: [],
  portalId: null,
  runs: [], // the first page of the portal's runs, newest first
  olderRuns: [], // pages loaded with "Older"
  runsCursor: null,
  details: new Map(), // run id -> { run, jobs, hubspotLimits }; finished runs are not fetched again
  samples: new Map(), // job id -> [{ t, done, pages }] as seen by this page
  runId: null, // the run on screen (null: the overview)
  stats: null, // queue_stats (operators), undefined until known, false when not an operator
  view: 'sync',
  message: null, // { text, error, code, runId }: runId set for "started" messages, cleared when that run ends
  channel: null,
  realtime: 'off', // 'off' | 'connecting' | 'live' | 'failed'
  refreshes: 0,
  refreshing: null, // the refresh under way (a promise)
  again: null, // a promise for the refresh asked for meanwhile
  againResolve: null,
  timer: null,
};

// ---------- configuration (the one place the page reads it) ----------

/**
 * First found wins: ./config.json (served by npm start --serve to the page opened with its #pageKey=…; mode 'local'),
 * the URL fragment (#supabaseUrl=…&accessToken=…[&anonKey=…][&mode=…]), or null
 * (the sign-in form). `?poll=off` in the query switches polling off (realtime only).
 */
async function loadConfig() {
  const poll = new URLSearchParams(location.search).get('poll') !== 'off';
  const hash = new URLSearchParams(location.hash.slice(1));
  // npm start's page key (#pageKey=…), kept for this window: a HubSpot install comes back without the fragment.
  const pageKey = hash.get('pageKey') ?? sessionStorage.getItem('queue.pageKey');
  if (pageKey) {
    try {
      const res = await fetch('./config.json', { cache: 'no-store', headers: { 'X-Page-Key': pageKey } });
      if (res.ok) {
        sessionStorage.setItem('queue.pageKey', pageKey);
        return { mode: 'local', poll, ...(await res.json()) };
      }
    } catch {
      /* not served by npm start: fall through */
    }
  }
  if (hash.get('supabaseUrl') && hash.get('accessToken')) {
    return { mode: hash.get('mode') ?? 'deployed', poll, supabaseUrl: hash.get('supabaseUrl'), accessToken: hash.get('accessToken'), anonKey: hash.get('anonKey') };
  }
  return null;
}

async function loadSupabase(cfg) {
  const { createClient } = await import(cfg.supabaseJsUrl ?? SUPABASE_JS);
  return createClient(cfg.supabaseUrl, cfg.anonKey);
}

// ---------- the orchestrator ----------

class ApiError extends Error {
  constructor(status, body, retryAfter) {
    super(body?.message ?? `HTTP ${status}`);
    this.status = status;
    this.code = body?.code ?? 'HTTP_ERROR';
    this.details = body?.details;
    this.retryAfter = retryAfter;
  }
}

async function api(path, { method = 'GET', body, raw = false } = {}) {
  const headers = { Authorization: `Bearer ${state.token}` };
  if (state.cfg.anonKey) headers.apikey = state.cfg.anonKey;
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const res = await fetch(`${state.cfg.supabaseUrl}/functions/v1/orchestrator${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  if (!res.ok) {
    const err = await res.json().catch(() => null);
    throw new ApiError(res.status, err, res.headers.get('retry-after'));
  }
  return raw ? res : res.json();
}

const portal = (id = state.portalId) => state.portals.find((p) => p.id === id);

// ---------- messages ----------

/** Shows an action's outcome; `runId`: a "started" note that goes once that run ends. */
function say(text, { error = false, code = null, runId = null } = {}) {
  state.message = { text, error, code, runId };
  renderMessage();
}

function sayError(e) {
  if (!(e instanceof ApiError)) return say(String(e.message ?? e), { error: true });
  const text = errorMessage(e.code, { authKind: portal()?.authKind, retryAfter: e.retryAfter ?? e.details?.retryAfterSeconds, fieldErrors: e.details?.fieldErrors });
  say(text, { error: true, code: e.code });
}

function renderMessage() {
  const m = $('message');
  const msg = state.message;
  if (msg?.runId) {
    const d = state.details.get(msg.runId);
    if (d && runView(d.run, d.jobs, contextFor(d.run)).finished) state.message = null;
  }
  const cur = state.message;
  m.className = cur?.error ? 'error' : '';
  m.replaceChildren();
  if (!cur) return;
  m.append(document.createTextNode(cur.text));
  if (cur.code) m.append(Object.assign(document.createElement('span'), { className: 'code', textContent: cur.code, title: 'Error code (for support)' }));
}

// ---------- the refresh loop ----------

/** One refresh of everything on screen: queue stats first, then the portal's runs and the runs that can still change. */
function refresh() {
  if (state.refreshing) {
    // Asked during a refresh (an action, a realtime event): one more after it, and the caller waits for that one.
    state.again ??= new Promise((resolve) => (state.againResolve = resolve));
    return state.again;
  }
  clearTimeout(state.timer);
  document.body.dataset.refreshing = 'true'; // until no refresh is left to run (tests wait on it)
  state.refreshing = (async () => {
    try {
      await loadAll();
      // A run that ended between the stats and the runs: look again at once rather than show two moments.
      if (contradiction()) await loadAll();
    } catch (e) {
      if (e instanceof ApiError && (e.code === 'UNAUTHENTICATED' || e.code === 'TOKEN_EXPIRED')) sayError(e);
    } finally {
      state.refreshes++;
      renderAll();
      document.body.dataset.refreshes = String(state.refreshes);
      state.refreshing = null;
      if (state.again) {
        const resolve = state.againResolve;
        state.again = null;
        refresh().then(resolve);
      } else {
        delete document.body.dataset.refreshing;
        schedule();
      }
    }
  })();
  return state.refreshing;
}

function schedule() {
  clearTimeout(state.timer);
  if (!state.cfg.poll && state.realtime !== 'failed') return; // ?poll=off: realtime events drive refreshes
  state.timer = setTimeout(refresh, state.realtime === 'live' ? POLL_MS_REALTIME : POLL_MS_LOCAL);
}

async function loadAll() {
  if (state.stats !== false) {
    try {
      state.stats = (await api('/stats')).stats;
      state.statsAt = Date.now();
    } catch (e) {
      if (e instanceof ApiError && e.code === 'NOT_AN_OPERATOR') state.stats = false;
    }
  }
  if (!state.portalId) return;
  const q = new URLSearchParams({ portalId: state.portalId, limit: String(RUNS_PAGE) });
  const [{ runs, nextCursor }, sync] = await Promise.all([
    api(`/runs?${q}`),
    // The portal's sync: last and next sync, the last one's changes (docs/sync.md). Optional: an older orchestrator has none.
    api(`/sync?${new URLSearchParams({ portalId: state.portalId })}`).catch(() => null),
  ]);
  state.sync = sync;
  state.runs = runs;
  if (!state.olderRuns.length) state.runsCursor = nextCursor;
  // Details of every run that may still change, the one on screen, and listed ones not seen yet (for the overview).
  const want = [...runs, ...state.olderRuns].filter((r) => {
    const known = state.details.get(r.id);
    return !known || !known.run.finishedAt || r.id === state.runId && r.kind === 'export' && !known.freshUrls;
  });
  if (state.runId && !want.some((r) => r.id === state.runId) && !state.details.get(state.runId)?.run.finishedAt) want.push({ id: state.runId });
  await Promise.all(want.map((r) => loadDetail(r.id).catch((e) => {
    if (e instanceof ApiError && e.code === 'RUN_NOT_FOUND') state.details.delete(r.id);
  })));
}

async function loadDetail(runId) {
  const d = await api(`?runId=${runId}`);
  d.freshUrls = d.run.kind === 'export' && d.run.id === state.runId;
  state.details.set(runId, d);
  const now = Date.now();
  for (const j of d.jobs) {
    const s = state.samples.get(j.id) ?? [];
    const last = s[s.length - 1];
    if (j.status === 'running' && (!last || last.done !== j.done)) s.push({ t: now, done: j.done, pages: pagesOf(j) });
    while (s.length > 600) s.shift();
    state.samples.set(j.id, s);
  }
  return d;
}

/** The stats and the runs disagree: the portal has running jobs in one and none in the other. */
function contradiction() {
  if (!state.stats || !state.portalId) return false;
  const statsRunning = state.stats.running_per_portal?.find((p) => p.portal_id === state.portalId)?.running ?? 0;
  const runsRunning = activeDetails().reduce((n, d) => n + d.jobs.filter((j) => j.status === 'running').length, 0);
  return statsRunning !== runsRunning;
}

const activeDetails = () => [...state.details.values()].filter((d) => d.run.portalId === state.portalId && !d.run.finishedAt);

/** What a run's jobs need to know of the rest of the portal: which types a fetch is still working on. */
function contextFor(run) {
  const fetchInFlight = new Set();
  for (const d of state.details.values()) {
    if (d.run.portalId !== run.portalId || d.run.kind !== 'fetch' || d.run.finishedAt) continue;
    for (const j of d.jobs) if (j.status === 'pending' || j.status === 'running') fetchInFlight.add(j.contentType);
  }
  return { fetchInFlight, authKind: portal(run.portalId)?.authKind };
}

/** The run as every view shows it. */
function viewOf(run) {
  const d = state.details.get(run.id);
  const r = d?.run ?? run;
  return { run: r, jobs: d?.jobs ?? null, view: runView(r, d?.jobs ?? null, contextFor(r)) };
}

// ---------- realtime ----------

/** postgres_changes on the portal's runs and jobs: merged at once, then one refresh for the rest. */
function subscribe() {
  if (!state.supabase) return;
  if (state.channel) state.supabase.removeChannel(state.channel);
  state.channel = null;
  if (!state.portalId) return;
  state.realtime = 'connecting';
  // The token first, given as such (realtime-js stores a given token at once): a channel subscribed
  // before Realtime has a token joins as anon and stays so (docs/frontend.md#live-progress).
  state.supabase.realtime.setAuth(state.token);
  state.channel = state.supabase
    .channel(`portal-${state.portalId}`)
    .on('postgres_changes', { event: '*', schema: 'public', table: 'jobs', filter: `portal_id=eq.${state.portalId}` }, (p) => mergeJob(p.new))
    .on('postgres_changes', { event: '*', schema: 'public', table: 'runs', filter: `portal_id=eq.${state.portalId}` }, (p) => mergeRun(p.new))
    // Live only once the server says its database side is subscribed; then one more read, so no change falls in between.
    .on('system', {}, (m) => {
      if (m.extension !== 'postgres_changes') return;
      if (m.status === 'ok') {
        state.realtime = 'live';
        refresh();
      } else realtimeFailed();
      renderConnection();
      schedule();
    })
    .subscribe((status) => {
      if (status === 'CHANNEL_ERROR' || status === 'TIMED_OUT') realtimeFailed();
      renderConnection();
      schedule();
    });
}

/** Realtime is not available (or refused the binding): remove the channel, which realtime-js would rejoin forever, and poll. */
function realtimeFailed() {
  state.realtime = 'failed';
  const ch = state.channel;
  state.channel = null;
  if (ch) state.supabase.removeChannel(ch);
}

let soon = null;
const refreshSoon = () => {
  clearTimeout(soon);
  soon = setTimeout(refresh, 300);
};

// Realtime rows are the tables' own columns (snake_case): mapped to the HTTP API's names.
function mergeJob(row) {
  if (!row?.run_id) return;
  const d = state.details.get(row.run_id);
  const j = d?.jobs.find((x) => String(x.id) === String(row.id));
  if (j) {
    Object.assign(j, {
      status: row.status, attempts: row.attempts, done: row.progress_done, total: row.progress_total, lastError: row.last_error,
      startedAt: row.started_at, finishedAt: row.finished_at, waitingReason: row.waiting_reason ?? null,
    });
    if (row.result && !(j.result && j.result.urlExpiresAt)) j.result = row.result;
    if (j.status === 'running') state.samples.get(j.id)?.push({ t: Date.now(), done: j.done, pages: pagesOf(j) });
    renderAll();
  }
  // A row the page doesn't hold yet (a new run), or polling on: one read for the rest. ?poll=off: events alone.
  if (!j || state.cfg.poll) refreshSoon();
}

function mergeRun(row) {
  const d = row?.id && state.details.get(row.id);
  if (d) {
    Object.assign(d.run, {
      status: row.status, jobsCompleted: row.jobs_completed, jobsFailed: row.jobs_failed, jobsStopped: row.jobs_stopped,
      startedAt: row.started_at, finishedAt: row.finished_at, waitingReason: row.waiting_reason ?? null,
    });
    renderAll();
  }
  if (!d || state.cfg.poll) refreshSoon();
}

// ---------- actions ----------

async function trigger(kind) {
  try {
    const created = await api('', { method: 'POST', body: { portalId: state.portalId, kind } });
    const dups = Object.keys(created.duplicateRunIds ?? {});
    const what = kind === 'export' ? 'Export' : 'Fetch';
    say(`${what} started for ${plural(created.createdTypes.length, 'content type')}` +
      (dups.length ? `; ${dups.map(typeLabel).join(', ')} already in progress in another sync` : '') + '.', { runId: created.runId });
    state.runId = created.runId;
  } catch (e) {
    if (e instanceof ApiError && e.code === 'ALL_DUPLICATE_JOBS') {
      const runIds = [...new Set(Object.values(e.details?.duplicateRunIds ?? {}))];
      say(`Everything is already being ${kind === 'export' ? 'exported' : 'fetched'}${runIds.length ? ': showing that sync' : ''}.`);
      if (runIds[0]) state.runId = runIds[0];
    } else sayError(e);
  }
  await refresh();
}

async function stopRun() {
  try {
    const r = await api('', { method: 'POST', body: { action: 'stop', runId: state.runId } });
    say(r.stopped ? 'Stopped.' : 'This sync had already ended.');
  } catch (e) {
    sayError(e);
  }
  await refresh();
}

function showRun(runId) {
  state.runId = runId;
  renderAll();
  refresh();
}

// Clickable nodes kept across renders (the same node, its handler the latest render's): a refresh
// that replaced one between the press and the release of a click would lose the click.
const keptNodes = new Map();
function kept(key, tag, onclick = null) {
  let el = keptNodes.get(key);
  if (!el) keptNodes.set(key, (el = document.createElement(tag)));
  el.onclick = onclick;
  return el;
}
const keptButton = (key, onclick) => kept(key, 'button', onclick);

async function download(job) {
  try {
    // Deployed: the GET's freshly signed Storage URL. Locally: the orchestrator streams the file to its owner.
    if (job.result.url && job.result.urlExpiresAt && Date.parse(job.result.urlExpiresAt) > Date.now() + 5000) {
      location.assign(job.result.url);
      return;
    }
    const res = await api(`/exports/${job.id}`, { raw: true });
    const name = /filename="([^"]+)"/.exec(res.headers.get('content-disposition') ?? '')?.[1] ?? `${job.contentType}.csv`;
    const url = URL.createObjectURL(await res.blob());
    const a = Object.assign(document.createElement('a'), { href: url, download: name });
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 60_000);
    say(`Downloaded ${name}.`);
  } catch (e) {
    sayError(e);
  }
}

// ---------- rendering: the sync view ----------

const node = (tag, props = {}, ...children) => {
  const n = Object.assign(document.createElement(tag), props);
  for (const c of children) if (c !== null && c !== undefined) n.append(c);
  return n;
};
const div = (className, ...children) => node('div', { className }, ...children);
const fmtRate = (r) => (r === null ? '—' : `${r >= 10 ? Math.round(r).toLocaleString() : r.toFixed(1)}/s`);
const count = (done, total) => `${done.toLocaleString()} / ${total === null ? '?' : total.toLocaleString()}`;

function renderAll() {
  renderConnection();
  renderPortalControls();
  renderMessage();
  renderRun();
  renderOverview();
  renderRuns();
  renderOperator();
}

function renderConnection() {
  const mode = state.supabase
    ? { off: 'deployed', connecting: 'connecting to realtime…', live: 'live (realtime)', failed: 'realtime unavailable: polling' }[state.realtime]
    : 'local (polling)';
  $('connection').textContent = `${state.cfg.supabaseUrl} · ${mode}`;
}

function renderPortalControls() {
  const p = portal();
  const busy = activeDetails();
  $('fetch-btn').disabled = !p;
  $('export-btn').disabled = !p;
  $('fetch-btn').title = busy.some((d) => d.run.kind === 'fetch') ? 'A fetch is in progress' : '';
}

function renderRun() {
  const card = $('run-card');
  const d = state.runId && state.details.get(state.runId);
  card.hidden = !d;
  if (!d) return;
  const { run, jobs } = d;
  const ctx = contextFor(run);
  const v = runView(run, jobs, ctx);
  const now = Date.now();
  $('run-title').textContent = runName(run, now);
  const st = $('run-status');
  st.textContent = v.label;
  st.dataset.status = v.status;
  st.className = `pill tone-${v.tone}`;
  $('stop-btn').disabled = v.finished;
  $('stop-btn').hidden = v.finished;

  const items = itemsOf(run, jobs);
  const done = jobs.filter((j) => j.status === 'completed').length;
  // Why types failed, in the user's words; said once above the rows when they all failed for the same reason.
  const errors = new Map(jobs.map((j) => [j.id, j.status === 'failed' || (j.lastError && !isTerminal(j.status)) ? jobErrorMessage(j.lastError, ctx) : null]));
  const distinct = [...new Set([...errors.values()].filter(Boolean))];
  const shared = distinct.length === 1 && [...errors.values()].filter(Boolean).length > 1 ? distinct[0] : null;
  const runRate = items.done && elapsedOf(run, now, jobs) > 0 ? items.done / elapsedOf(run, now, jobs) : null;
  $('run-summary').replaceChildren(...[
    node('span', {}, v.finished ? 'Took ' : 'Elapsed ', node('b', { id: 'run-elapsed', textContent: duration(v.status === 'queued' ? 0 : elapsedOf(run, now, jobs)) })),
    node('span', {}, node('b', { textContent: count(items.done, items.total) }), run.kind === 'export' ? ' rows' : ' items'),
    node('span', {}, node('b', { textContent: `${done} of ${jobs.length}` }), ' content types done'),
    runRate && !v.finished ? node('span', {}, 'average ', node('b', { textContent: fmtRate(runRate) })) : null,
    v.reason ? node('span', { className: 'tone-wait', textContent: v.reason }) : null,
    shared ? node('span', { className: 'tone-bad job-error', textContent: shared, title: 'Why the failed content types failed' }) : null,
  ].filter(Boolean));

  const head = div('type-row head', div('', 'Content'), div('', 'Status'), div('', 'Progress'), div('num', 'Done'), div('num', 'Rate'), div('num', 'Left'), div('', ''));
  const rows = jobs.map((j) => {
    const jv = jobView(j, run.kind, ctx);
    const { rate, eta } = rateAndEta(j, state.samples.get(j.id), now);
    const row = div('type-row');
    Object.assign(row.dataset, { type: j.contentType, status: jv.status, jobId: j.id, tone: jv.tone });
    const bar = div('bar', node('div', { style: `width:${jv.pct}%` }));
    bar.title = `${jv.pct.toFixed(0)}%`;
    const action = div('action');
    if (run.kind === 'export' && j.status === 'completed' && j.result) {
      const b = keptButton(`job:${j.id}`, () => download(j));
      Object.assign(b, { className: 'download', textContent: 'Download CSV', title: `${plural(j.result.rows, 'row')}, ${(j.result.bytes / 1024).toFixed(0)} KB` });
      b.dataset.type = j.contentType;
      action.append(b);
    }
    row.append(
      div('label', typeLabel(j.contentType)),
      div(`status tone-${jv.tone}`, jv.label),
      bar,
      div('num count', count(j.done, totalOf(j))),
      div('num rate', fmtRate(rate)),
      div('num eta', j.status === 'completed' ? 'done' : eta === null ? '—' : duration(eta)),
      action,
    );
    const err = errors.get(j.id);
    if (err && !shared) row.append(node('div', { className: 'note tone-bad job-error', textContent: err, title: j.lastError }));
    if (err) row.title = j.lastError; // the worker's own words, for whoever asks support
    return row;
  });
  $('jobs').replaceChildren(head, ...rows);
  $('jobs').classList.toggle('has-actions', run.kind === 'export');
  renderCharts(d, now, v.finished);
}

/** A chart drawn at its box's width. */
function chartIn(id, series, opts) {
  const box = $(id);
  box.replaceChildren(lineChart(series, { ...opts, width: box.clientWidth }));
}

function renderCharts(d, now, finished) {
  const { run, jobs, hubspotLimits } = d;
  const series = throughputSeries(jobs, state.samples, now, 30);
  const rel = (t0, t1) => [`0 s`, duration((t1 - t0) / 1000)];
  chartIn('chart-throughput',
    [{ label: 'items/s', color: '#0969da', points: series.map((p) => ({ t: p.t, v: p.items })) }],
    { title: 'Throughput in items per second', empty: finished ? 'Nothing was transferred' : 'Starts when the first content type does', xLabel: rel },
  );
  const text = [];
  if (run.kind === 'export') {
    chartIn('chart-budget', [], { empty: 'Exports read your database only: no HubSpot requests' });
  } else {
    const per10s = hubspotLimits?.maxPerInterval && hubspotLimits.intervalMs ? (hubspotLimits.maxPerInterval * 10_000) / hubspotLimits.intervalMs : null;
    chartIn('chart-budget',
      [{ label: 'requests', color: '#bc4c00', points: series.map((p) => ({ t: p.t, v: p.requests * 10 })) }],
      { title: 'HubSpot requests per 10 seconds', limit: per10s ? { v: per10s, label: `HubSpot's limit ${Math.round(per10s)}` } : null, empty: 'No HubSpot requests yet', xLabel: rel },
    );
    const pages = jobs.reduce((s, j) => s + pagesOf(j), 0);
    text.push(`${plural(pages, 'request')} to HubSpot in this sync`);
    if (hubspotLimits?.dailyLimit) {
      const used = hubspotLimits.dailyLimit - (hubspotLimits.dailyRemaining ?? hubspotLimits.dailyLimit);
      text.push(`today ${used.toLocaleString()} of ${hubspotLimits.dailyLimit.toLocaleString()} daily requests used${hubspotLimits.dailyResetsAt ? ` (resets ${when(hubspotLimits.dailyResetsAt, now)})` : ''}`);
    }
  }
  $('budget-text').textContent = text.join(' · ');
}

/** The portal's content types: each one's last fetch (and the sync working on it now), its last export. */
/** The portal's last sync (mode, when, what changed) and next one, above the content types. */
function renderSyncSummary(now) {
  const el = $('sync-summary');
  const s = state.portalId && state.sync;
  el.hidden = !s;
  if (!s) return;
  const parts = [];
  if (s.lastSync) {
    const c = s.lastSync.changes;
    const mode = s.lastSync.mode === 'incremental' ? 'changes only' : 'everything';
    parts.push(node('span', {}, 'Last sync ', node('b', { textContent: ago(s.lastSync.finishedAt, now) }), ` (${mode}${s.lastSync.trigger === 'schedule' ? ', scheduled' : ''}): `,
      node('b', { id: 'sync-changes', textContent: `${plural(c.added, 'new item')}, ${c.updated.toLocaleString()} updated, ${c.deleted.toLocaleString()} deleted` })));
  } else parts.push(node('span', {}, 'Not synced yet'));
  const sched = s.schedule;
  if (s.activeSyncRunId) parts.push(node('span', { className: 'tone-run', textContent: 'a sync is running' }));
  else if (s.nextSyncAt) {
    const secs = (Date.parse(s.nextSyncAt) - now) / 1000;
    parts.push(node('span', {}, 'next ', node('b', { id: 'sync-next', textContent: secs > 0 ? `in ${duration(secs)}` : 'due now' }),
      sched?.incrementalEveryMinutes ? ` (every ${duration(sched.incrementalEveryMinutes * 60)})` : ''));
  } else parts.push(node('span', { className: 'muted', textContent: sched?.paused ? 'schedule paused' : 'no sync schedule' }));
  el.replaceChildren(...parts);
}

function renderOverview() {
  const types = Object.keys(TYPE_LABELS);
  const all = [...state.runs, ...state.olderRuns].map((r) => viewOf(r));
  const now = Date.now();
  const rows = types.map((t) => {
    let current = null; // { jv, run } of an unfinished run's job
    let lastFetch = null; // { job, run }
    let lastExport = null;
    for (const { run, jobs } of all) {
      const job = jobs?.find((j) => j.contentType === t);
      if (!job) continue;
      if (!current && !isTerminal(job.status)) current = { jv: jobView(job, run.kind, contextFor(run)), run };
      if (!lastFetch && run.kind === 'fetch' && isTerminal(job.status)) lastFetch = { job, run };
      if (!lastExport && run.kind === 'export' && job.status === 'completed' && job.result) lastExport = { job, run };
    }
    const lastOk = all.find(({ run, jobs }) => run.kind === 'fetch' && jobs?.some((j) => j.contentType === t && j.status === 'completed'));
    const okJob = lastOk?.jobs.find((j) => j.contentType === t);
    const row = div('type-row ov');
    row.dataset.type = t;
    let statusText;
    let tone = 'neutral';
    if (current) {
      const kind = current.run.kind === 'export' ? 'Export' : 'Fetch';
      statusText = current.jv.label.startsWith(kind) ? current.jv.label : `${kind}: ${current.jv.label.toLowerCase()}`;
      tone = current.jv.tone;
    } else if (lastFetch) {
      const jv = jobView(lastFetch.job, 'fetch');
      statusText = lastFetch.job.status === 'completed' ? 'Up to date' : `Last fetch ${jv.label.toLowerCase()}`;
      tone = lastFetch.job.status === 'completed' ? 'ok' : jv.tone;
    } else statusText = 'Never fetched';
    row.dataset.status = current ? current.jv.status : lastFetch ? lastFetch.job.status : 'never';
    const action = div('action');
    if (lastExport) {
      const b = keptButton(`overview:${t}`, async () => download((await loadDetail(lastExport.run.id)).jobs.find((j) => j.contentType === t)));
      Object.assign(b, { className: 'download', textContent: `CSV ${when(lastExport.run.createdAt, now)}`, title: `Download the export of ${when(lastExport.run.createdAt, now)}` });
      b.dataset.type = t;
      action.append(b);
    }
    row.append(
      div('label', typeLabel(t)),
      div(`status tone-${tone}`, statusText),
      div('muted synced', okJob ? `${lastFetch?.job === okJob ? 'fetched' : 'last complete'} ${ago(okJob.finishedAt, now)}` : ''),
      div('num count', okJob ? plural(okJob.done, 'item') : ''),
      action,
    );
    return row;
  });
  $('overview').replaceChildren(...rows);
  renderSyncSummary(now);
  $('overview-note').textContent = !state.portalId ? 'Connect a portal to start.' : all.length ? '' : 'Nothing fetched yet: “Fetch all” copies every content type.';
}

function renderRuns() {
  const list = [...state.runs, ...state.olderRuns];
  const now = Date.now();
  $('runs-empty').hidden = list.length > 0 || !state.portalId;
  $('runs-more').hidden = !state.runsCursor;
  $('runs-list').replaceChildren(...list.map((r) => {
    const { run, jobs, view } = viewOf(r);
    const items = itemsOf(run, jobs);
    const li = kept(`run:${run.id}`, 'li', () => showRun(run.id));
    li.className = run.id === state.runId ? 'active' : '';
    Object.assign(li.dataset, { runId: run.id, status: view.status });
    const part = (name, props) => Object.assign(kept(`run:${run.id}:${name}`, 'span'), props);
    li.replaceChildren(
      part('name', { className: 'run-name', textContent: runName(run, now) }),
      part('pill', { className: `pill tone-${view.tone}`, textContent: view.label }),
      part('meta', {
        className: 'run-meta',
        textContent: [
          plural(run.contentTypes.length, 'content type'),
          `${items.done.toLocaleString()}${items.total !== null ? ` of ${items.total.toLocaleString()}` : ''} ${run.kind === 'export' ? 'rows' : 'items'}`,
          view.status !== 'queued' ? `${view.finished ? 'took' : 'for'} ${duration(elapsedOf(run, now, jobs))}` : null,
        ].filter(Boolean).join(' · '),
      }),
    );
    return li;
  }));
}

// ---------- rendering: the operator view ----------

function table(cols, rows, empty = 'none') {
  if (!rows.length) return node('p', { className: 'muted', textContent: empty });
  const t = node('table');
  t.append(node('tr', {}, ...cols.map((c) => node('th', { className: c.cls ?? '', textContent: c.label }))));
  for (const r of rows) t.append(node('tr', {}, ...cols.map((c, i) => node('td', { className: c.cls ?? '', textContent: r[i] ?? '' }))));
  return div('scroll', t); // a table wider than a phone scrolls inside its card, not the page
}

function renderOperator() {
  const s = state.stats;
  $('tabs').hidden = !s;
  if (!s) {
    if (state.view === 'operator') setView('sync');
    return;
  }
  const now = Date.now();
  const sum = (kind, status) => s.by_kind_and_status.filter((x) => (!kind || x.kind === kind) && x.status === status).reduce((n, x) => n + x.jobs, 0);
  $('ops-updated').textContent = `updated ${ago(new Date(state.statsAt).toISOString(), now)}`;
  const tiles = [
    ['unfinished-runs', s.unfinished_runs, 'unfinished runs'],
    ['pending', sum(null, 'pending'), 'jobs pending'],
    ['running', sum(null, 'running'), 'jobs running'],
    ['oldest-pending', s.oldest_pending_age_seconds === null ? '—' : duration(s.oldest_pending_age_seconds), 'oldest pending job waits'],
    ['failed-hour', s.failed_last_hour, 'failed in the last hour'],
  ];
  $('ops-tiles').replaceChildren(...tiles.map(([key, v, label]) => {
    const t = div('tile', node('b', { textContent: String(v) }), node('span', { textContent: label }));
    t.dataset.key = key;
    t.dataset.value = String(v);
    return t;
  }));
  const statuses = ['pending', 'running', 'completed', 'failed', 'stopped'];
  const kinds = [...new Set(['fetch', 'export', ...s.by_kind_and_status.map((x) => x.kind)])];
  const depth = table(
    [{ label: 'kind' }, ...statuses.map((st) => ({ label: st, cls: 'num' }))],
    kinds.map((k) => [k, ...statuses.map((st) => String(sum(k, st)))]),
  );
  $('ops-depth').replaceChildren(depth, node('p', { className: 'muted', textContent: 'completed, failed, stopped: in the last hour' }));
  $('ops-portals').replaceChildren(table(
    [{ label: 'portal' }, { label: 'running', cls: 'num' }],
    s.running_per_portal.map((p) => [p.name, String(p.running)]),
    'No job is running.',
  ));
  for (const [i, p] of s.running_per_portal.entries()) $('ops-portals').querySelectorAll('tr')[i + 1].dataset.portalId = p.portal_id;
  $('ops-budget').replaceChildren(table(
    [{ label: 'HubSpot portal' }, { label: 'requests', cls: 'num' }, { label: 'limit', cls: 'num' }, { label: 'used', cls: 'num' }, { label: 'daily left', cls: 'num wide' }],
    s.hubspot_budget_last_10s.map((b) => {
      const limit = b.max_per_interval && b.interval_ms ? (b.max_per_interval * 10_000) / b.interval_ms : null;
      return [
        `${b.name ?? 'portal'} (${b.hubspot_portal_id})`, String(b.requests), limit === null ? '—' : String(Math.round(limit)),
        limit ? `${Math.round((100 * b.requests) / limit)}%` : '—',
        b.daily_limit ? `${(b.daily_remaining ?? b.daily_limit).toLocaleString()} of ${b.daily_limit.toLocaleString()}` : '—',
      ];
    }),
    'No HubSpot requests in the last 10 s.',
  ));
  const hour = s.last_hour ?? [];
  $('ops-chart').replaceChildren(
    lineChart([
      { label: 'jobs completed', color: '#1a7f37', points: hour.map((m) => ({ t: Date.parse(m.minute), v: m.completed })) },
      { label: 'jobs failed', color: '#cf222e', points: hour.map((m) => ({ t: Date.parse(m.minute), v: m.failed })) },
      { label: 'invocations', color: '#8250df', points: hour.map((m) => ({ t: Date.parse(m.minute), v: m.invocations })) },
    ], { width: $('ops-chart').clientWidth, title: 'The last hour per minute', xLabel: () => ['60 min ago', 'now'], empty: 'Nothing in the last hour' }),
    legend([{ label: 'jobs completed', color: '#1a7f37' }, { label: 'jobs failed', color: '#cf222e' }, { label: 'worker invocations', color: '#8250df' }]),
  );
  $('ops-failures').replaceChildren(table(
    [{ label: 'when' }, { label: 'kind' }, { label: 'content' }, { label: 'error' }],
    s.recent_failures.map((f) => [ago(f.finished_at, now), f.kind, typeLabel(f.content_type), f.last_error ?? '']),
    'No failures in the last hour.',
  ));
  for (const td of $('ops-failures').querySelectorAll('td:last-child')) td.className = 'wrap-anywhere';
  $('ops-invocations').replaceChildren(table(
    [{ label: 'ended' }, { label: 'source', cls: 'wide' }, { label: 'took', cls: 'num' }, { label: 'claimed', cls: 'num' }, { label: 'done', cls: 'num' },
      { label: 'released', cls: 'num wide' }, { label: 'failed', cls: 'num' }, { label: 'CPU', cls: 'num wide' }, { label: 'stopped because' }],
    idleGrouped(s.recent_invocations).slice(0, 12).map((i) => [
      ago(i.ended_at, now) + (i.idle > 1 ? ` (${i.idle} idle in a row)` : ''), i.source, duration((Date.parse(i.ended_at) - Date.parse(i.started_at)) / 1000),
      String(i.claimed), String(i.completed),
      String(i.released), String(i.failed), i.cpu_ms === null ? '—' : `${i.cpu_ms} ms`,
      (STOP_REASONS[i.stopped_by] ?? i.stopped_by) + (i.shutdown_reason ? ` (${i.shutdown_reason})` : ''),
    ]),
    'No invocation in the last hour.',
  ));
}

/** Invocations newest first, runs of idle ones (nothing claimed, queue empty) folded into their newest. */
function idleGrouped(invocations) {
  const out = [];
  for (const i of invocations) {
    const idle = i.claimed === 0 && i.stopped_by === 'queue_empty';
    const prev = out[out.length - 1];
    if (idle && prev?.idle) prev.idle++;
    else out.push({ ...i, idle: idle ? 1 : 0 });
  }
  return out;
}

function setView(view) {
  state.view = view;
  $('view-sync').hidden = view !== 'sync';
  $('view-operator').hidden = view !== 'operator';
  for (const b of $('tabs').querySelectorAll('button')) b.setAttribute('aria-selected', String(b.dataset.view === view));
  if (state.cfg) renderAll(); // charts take the width of a box that was hidden; every view at one moment
}

// ---------- portals ----------

async function loadPortals(select) {
  const { portals } = await api('/portals');
  state.portals = portals;
  const sel = $('portal-select');
  // A disconnected portal (the HubSpot app was uninstalled) says so: connecting it again clears that.
  const label = (p) => `${p.name} (HubSpot ${p.hubspotPortalId})${p.disconnectedAt ? ' — disconnected: reconnect it' : ''}`;
  sel.replaceChildren(...portals.map((p) => node('option', { value: p.id, textContent: label(p), title: p.disconnectedReason ?? '' })));
  if (select) sel.value = select;
  else if (state.portalId && portals.some((p) => p.id === state.portalId)) sel.value = state.portalId;
  choosePortal(sel.value || null);
  if (!portals.length || portals.some((p) => p.id === state.portalId && p.disconnectedAt)) $('connect-box').open = true;
}

function choosePortal(id) {
  if (id === state.portalId) return;
  state.portalId = id;
  state.runs = [];
  state.olderRuns = [];
  state.runsCursor = null;
  state.runId = null;
  subscribe();
}

/** Opens the run still in progress, if any (the newest): that is what people come back to watch. */
function openActiveRun() {
  if (state.runId) return;
  const active = state.runs.find((r) => !viewOf(r).view.finished);
  if (active) state.runId = active.id;
}

// ---------- HubSpot OAuth install ----------

/**
 * Back from HubSpot's authorize page (this page is the app's redirect URL): finishes the install
 * with the query's code (or error) and state; returns the connected portal's id (undefined otherwise).
 */
async function completeInstall() {
  const back = new URLSearchParams(location.search);
  if (!back.has('state') || !(back.has('code') || back.has('error'))) return;
  history.replaceState(null, '', location.pathname + location.hash); // code and state leave the address bar
  const answer = back.has('code') ? { code: back.get('code') } : { error: back.get('error') };
  const p = await api('', { method: 'POST', body: { action: 'complete_hubspot_install', state: back.get('state'), ...answer } });
  $('connect-box').open = false;
  say(`Connected “${p.name}” (HubSpot ${p.hubspotPortalId}) through the HubSpot app.`);
  return p.portalId;
}

// ---------- start ----------

async function start(cfg) {
  state.cfg = cfg;
  state.token ??= cfg.accessToken;
  $('signin').hidden = true;
  $('app').hidden = false;
  renderConnection();
  if (cfg.demoPortal) $('connect-name').value = cfg.demoPortal.name;
  $('portal-select').onchange = () => {
    choosePortal($('portal-select').value);
    renderAll();
    refresh();
  };
  for (const b of $('tabs').querySelectorAll('button')) b.onclick = () => setView(b.dataset.view);
  $('fetch-btn').onclick = () => trigger('fetch');
  $('export-btn').onclick = () => trigger('export');
  $('stop-btn').onclick = stopRun;
  $('run-close').onclick = () => {
    state.runId = null;
    renderAll();
  };
  $('runs-more').onclick = async () => {
    try {
      const q = new URLSearchParams({ portalId: state.portalId, limit: String(RUNS_PAGE), cursor: state.runsCursor });
      const { runs, nextCursor } = await api(`/runs?${q}`);
      state.olderRuns.push(...runs);
      state.runsCursor = nextCursor;
      await refresh();
    } catch (e) {
      sayError(e);
    }
  };
  $('connect-btn').onclick = async () => {
    try {
      const p = await api('', { method: 'POST', body: { action: 'connect_portal', name: $('connect-name').value, accessToken: $('connect-token').value } });
      $('connect-token').value = '';
      $('connect-box').open = false;
      await loadPortals(p.portalId);
      say(`Connected “${p.name}” (HubSpot ${p.hubspotPortalId}).`);
    } catch (e) {
      sayError(e);
    }
    await refresh();
  };
  $('install-btn').onclick = async () => {
    try {
      const { authorizeUrl } = await api('', { method: 'POST', body: { action: 'start_hubspot_install' } });
      location.assign(authorizeUrl);
    } catch (e) {
      sayError(e);
    }
  };
  let installed;
  try {
    installed = await completeInstall();
  } catch (e) {
    sayError(e); // e.g. HUBSPOT_ACCESS_DENIED: the install was cancelled on HubSpot
  }
  try {
    await loadPortals(installed);
  } catch (e) {
    sayError(e);
  }
  await refresh();
  openActiveRun();
  renderAll();
  setInterval(() => {
    // Elapsed times and "ago" move on between refreshes.
    if (!state.refreshing) renderAll();
  }, 1000);
}

const cfg = await loadConfig();
if (!cfg?.accessToken) {
  // No token given: sign in (deployed, or npm start's local Auth) with sign-in.js.
  const user = await signIn(cfg, cfg?.supabaseJsUrl ?? SUPABASE_JS);
  state.supabase = user.cfg.mode === 'deployed' || user.cfg.realtime ? user.supabase : null;
  user.onToken((token) => (state.token = token));
  await start(user.cfg);
} else {
  if (cfg.anonKey && (cfg.mode === 'deployed' || cfg.realtime)) {
    state.supabase = await loadSupabase(cfg).catch(() => null);
  }
  await start(cfg);
}
