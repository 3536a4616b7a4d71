// The progress page: ES modules, no build step, no dependencies locally. It
// talks to the orchestrator function only (plain fetch with the user's access
// token); with an anon key (deployed, or `npm start -- --serve` and its local
// Realtime stand-in) it also loads supabase-js (signing in, and realtime
// postgres_changes on the portal's runs and jobs). Two views: Sync (for the
// people syncing their portal) and Operator (queue_stats, for the team that
// runs the queue). One refresh loop feeds both, and it runs again after every
// action, so the views never show different moments. What a status means and
// what people read is decided in status.js only. This file holds the loop,
// realtime, the actions and the start; the views, the API client and the
// state are their own modules.

import { api, ApiError, loadConfig, loadSupabase, SUPABASE_JS } from './api-client.js';
import { renderMessage, say, sayError } from './messages.js';
import { initOperatorActions, loadOperatorActions, renderOperatorActions } from './operator-actions.js';
import { renderOperator } from './operator-view.js';
import { initSchedule, renderSchedule } from './schedule.js';
import { $, activeDetails, node, state, viewOf } from './page.js';
import { initPublish, loadPublish, renderPublish } from './publish-view.js'; // the Publish card
import { renderConnection, renderOverview, renderPortalControls, renderRun, renderRuns } from './sync-view.js';
import { pagesOf, plural, runSpan, stopQuestion, typeLabel } from './status.js';
import { signIn } from './sign-in.js';

const POLL_MS_LOCAL = 1000;
const POLL_MS_REALTIME = 15000; // a safety net next to realtime
const DUE_POLL_MS = 2000; // while the portal's next sync is due: when it is checked, its next time
const RUNS_PAGE = 10;

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
  // A sync due now (a schedule just saved, say) is checked within seconds, and a quiet check makes no run for
  // Realtime to report: its next time is read again soon, for a minute at most, not 15 s later.
  const dueFor = state.sync?.nextSyncAt ? Date.now() - Date.parse(state.sync.nextSyncAt) : -1;
  const due = dueFor >= 0 && dueFor < 60_000;
  if (!state.cfg.poll && state.realtime !== 'failed' && !due) return; // ?poll=off: realtime events drive refreshes
  state.timer = setTimeout(refresh, due ? DUE_POLL_MS : state.realtime === 'live' ? POLL_MS_REALTIME : POLL_MS_LOCAL);
}

async function loadAll() {
  if (state.stats !== false) {
    try {
      // The operator's jobs and portals only while their view is open (the stats feed both views' contradiction check).
      const [stats] = await Promise.all([api('/stats'), state.view === 'operator' ? loadOperatorActions() : null]);
      state.stats = stats.stats;
      state.statsAt = Date.now();
    } catch (e) {
      if (e instanceof ApiError && e.code === 'NOT_AN_OPERATOR') state.stats = false;
    }
  }
  if (!state.portalId) return;
  const q = new URLSearchParams({ portalId: state.portalId, limit: String(RUNS_PAGE) });
  // The requests chart's windows: from the run on screen's start as its charts take it (at most 24 h back), else the last 10 minutes.
  const shown = state.runId && state.details.get(state.runId);
  const since = new Date(Math.max(Date.now() - 86_000_000, shown ? runSpan(shown.run, Date.now(), shown.jobs).from - 10_000 : Date.now() - 600_000));
  const [{ runs, nextCursor }, sync, requests, { portals }] = await Promise.all([
    api(`/runs?${q}`),
    // The portal's sync: last and next sync, the last one's changes (docs/sync.md). Optional: an older orchestrator has none.
    api(`/sync?${new URLSearchParams({ portalId: state.portalId })}`).catch(() => null),
    api(`/requests?${new URLSearchParams({ portalId: state.portalId, since: since.toISOString() })}`).catch(() => null),
    // Portals again: one disconnected meanwhile is marked (and cannot be fetched) without a reload.
    api('/portals'),
  ]);
  state.sync = sync;
  state.requests = requests;
  showPortals(portals);
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
  // The stored counts change only when a fetch writes: read on load, then when a fetch job or run is seen
  // ending (a quiet scheduled check makes no run, so it reads nothing), not on every refresh.
  const countsKey = lastFetchEnd(runs);
  if (countsKey !== state.countsKey || state.counts?.portalId !== state.portalId) await loadCounts(countsKey);
  await loadPublish(); // the Publish card: the portal's plans, after the runs (it reads their ends)
}

/** When (ms) the portal's latest fetch job or run the page knows of ended; 0 before any. */
function lastFetchEnd(runs) {
  const ends = runs.filter((r) => r.kind === 'fetch' && r.finishedAt).map((r) => Date.parse(r.finishedAt));
  for (const d of state.details.values()) {
    if (d.run.portalId !== state.portalId || d.run.kind !== 'fetch') continue;
    for (const j of d.jobs) if (j.kind === 'fetch' && j.finishedAt) ends.push(Date.parse(j.finishedAt)); // realtime's format too
  }
  return Math.max(0, ...ends.filter(Number.isFinite));
}

/** The portal's stored items per content type (GET /content: counted from the content, never a job's progress). */
async function loadCounts(key) {
  const portalId = state.portalId;
  try {
    const { types } = await api(`/content?${new URLSearchParams({ portalId })}`);
    if (portalId !== state.portalId) return;
    state.counts = { portalId, items: new Map(types.map((t) => [t.contentType, t.items])) };
    state.countsKey = key;
  } catch {
    // Kept as they were; read again on the next refresh.
  }
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
    const active = row.status === 'pending' || row.status === 'running';
    Object.assign(j, {
      status: row.status, attempts: row.attempts, done: row.progress_done, total: row.progress_total, lastError: row.last_error,
      startedAt: row.started_at, finishedAt: row.finished_at, waitingReason: row.waiting_reason ?? null,
      // As the HTTP API derives them: a pending job's due time, and while it keeps failing without progress, its give-up time.
      waitingUntil: row.status === 'pending' && row.run_after && row.run_after !== 'infinity' ? row.run_after : null,
      retryingUntil: active && row.failing_progress !== null && row.failing_progress !== undefined && row.progress_done <= row.failing_progress
        ? row.retry_until : null,
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
  // A run that ended changes the portal's last sync and schedule: read them (with ?poll=off too).
  if (!d || state.cfg.poll || row?.finished_at) refreshSoon();
}

// ---------- actions ----------

async function trigger(kind, fetchMode) {
  try {
    const created = await api('', { method: 'POST', body: { portalId: state.portalId, kind, ...(fetchMode ? { fetchMode } : {}) } });
    const dups = Object.keys(created.duplicateRunIds ?? {});
    const what = kind === 'export' ? 'Export' : fetchMode === 'incremental' ? 'Sync of changes' : 'Fetch';
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
  const d = state.details.get(state.runId);
  if (!d || !confirm(stopQuestion(d.run.kind))) return;
  try {
    const r = await api('', { method: 'POST', body: { action: 'stop', runId: state.runId } });
    say(r.stopped ? 'Stopped.' : 'This sync had already ended.');
  } catch (e) {
    sayError(e);
  }
  await refresh();
}

/** The failed types of the run on screen, started again as a new run of the same kind and mode. */
async function retryFailed() {
  const d = state.details.get(state.runId);
  const types = [...new Set(d?.jobs.filter((j) => j.status === 'failed' && j.contentType).map((j) => j.contentType) ?? [])];
  if (!types.length) return;
  try {
    const body = { portalId: d.run.portalId, kind: d.run.kind, contentTypes: types, ...(d.run.kind === 'fetch' ? { fetchMode: d.run.fetchMode ?? 'full' } : {}) };
    const created = await api('', { method: 'POST', body });
    say(`Trying ${plural(created.createdTypes.length, 'failed content type')} again.`, { runId: created.runId });
    state.runId = created.runId;
  } catch (e) {
    if (e instanceof ApiError && e.code === 'ALL_DUPLICATE_JOBS') say('Those types are already being synced.');
    else sayError(e);
  }
  await refresh();
}

/** Disconnects the portal on screen (its HubSpot tokens deleted; content, syncs and files kept), after asking. */
async function disconnectPortal() {
  const p = state.portals.find((x) => x.id === state.portalId);
  if (!p || !confirm(`Disconnect “${p.name}” from HubSpot? Its HubSpot tokens are deleted and a fetch in progress fails. ` +
    'Its content, syncs and export files stay, and connecting it again reconnects it.')) return;
  try {
    const r = await api('', { method: 'POST', body: { action: 'disconnect_portal', portalId: p.id } });
    say(`Disconnected “${p.name}” from HubSpot${r.failedFetchJobs ? `; ${plural(r.failedFetchJobs, 'fetch')} in progress ended` : ''}. Connect it again to sync.`);
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

// ---------- rendering ----------

function renderAll() {
  renderConnection();
  renderPortalControls();
  renderMessage();
  renderRun();
  renderOverview(loadDetail);
  renderRuns(showRun);
  renderSchedule();
  renderOperator(setView);
  if (state.stats) renderOperatorActions();
  renderPublish();
}

function setView(view) {
  state.view = view;
  $('view-sync').hidden = view !== 'sync';
  $('view-operator').hidden = view !== 'operator';
  for (const b of $('tabs').querySelectorAll('button')) b.setAttribute('aria-selected', String(b.dataset.view === view));
  if (state.cfg) renderAll(); // charts take the width of a box that was hidden; every view at one moment
  if (state.cfg && view === 'operator') refresh(); // its jobs and portals are read while it is open
}

// ---------- portals ----------

/** The portal list as the select shows it (a disconnected portal says so: connecting it again clears that). */
function showPortals(portals) {
  state.portals = portals;
  const sel = $('portal-select');
  const label = (p) => `${p.name} (HubSpot ${p.hubspotPortalId})${p.disconnectedAt ? ' — disconnected: reconnect it' : ''}`;
  const key = JSON.stringify(portals.map((p) => [p.id, label(p)]));
  if (sel.dataset.portals === key) return;
  sel.dataset.portals = key;
  const current = sel.value;
  sel.replaceChildren(...portals.map((p) => node('option', { value: p.id, textContent: label(p), title: p.disconnectedReason ?? '' })));
  if (current) sel.value = current;
}

async function loadPortals(select) {
  const { portals } = await api('/portals');
  showPortals(portals);
  const sel = $('portal-select');
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
  state.counts = null;
  state.countsKey = null;
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
  $('changes-btn').onclick = () => trigger('fetch', 'incremental');
  // Each action reports where it was taken: the Operator view and the schedule card have lines of their own.
  initOperatorActions({ api, refreshAll: refresh, say: (text, o) => say(text, { ...o, place: 'operator' }), sayError: (e) => sayError(e, { place: 'operator', own: true }) });
  initSchedule({
    api, refreshAll: refresh, say: (text, o) => say(text, { ...o, place: 'schedule' }), sayError: (e) => sayError(e, { place: 'schedule' }),
    portalId: () => state.portalId, sync: () => state.sync,
  });
  initPublish({ api, refreshAll: refresh, showRun }); // the Publish card says its own messages
  $('export-btn').onclick = () => trigger('export');
  $('stop-btn').onclick = stopRun;
  $('retry-failed-btn').onclick = retryFailed;
  $('disconnect-btn').onclick = disconnectPortal;
  $('connect-token-show').onclick = () => {
    const shown = $('connect-token').type === 'text';
    $('connect-token').type = shown ? 'password' : 'text';
    Object.assign($('connect-token-show'), { textContent: shown ? 'Show' : 'Hide', title: shown ? 'Show the token' : 'Hide the token' });
    $('connect-token-show').setAttribute('aria-pressed', String(!shown));
  };
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
      $('connect-token').type = 'password';
      Object.assign($('connect-token-show'), { textContent: 'Show', title: 'Show the token' });
      $('connect-token-show').setAttribute('aria-pressed', 'false');
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
